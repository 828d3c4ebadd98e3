//! The rules, quoted from elf(5) and the kernel, with what breaking them
//! does: the errno and when it happens.

use crate::model::elf::{Severity, Stage};

/// What a rule predicts, reused by many rules.
#[derive(Clone, Copy)]
pub(super) struct Effect {
    pub(super) severity: Severity,
    pub(super) errno: Option<&'static str>,
    pub(super) stage: Stage,
    /// si_code of the SIGSEGV a user-space crash gets.
    pub(super) si_code: Option<&'static str>,
}

pub(super) const ENOEXEC: Effect = before("ENOEXEC");
pub(super) const ELIBBAD: Effect = before("ELIBBAD");
pub(super) const WARNING: Effect = Effect {
    severity: Severity::Warning,
    errno: None,
    stage: Stage::None,
    si_code: None,
};

pub(super) const fn before(errno: &'static str) -> Effect {
    Effect {
        severity: Severity::Error,
        errno: Some(errno),
        stage: Stage::BeforePointOfNoReturn,
        si_code: None,
    }
}

pub(super) const fn after(errno: &'static str) -> Effect {
    Effect {
        severity: Severity::Error,
        errno: Some(errno),
        stage: Stage::AfterPointOfNoReturn,
        si_code: Some("SI_KERNEL"),
    }
}

pub(super) const fn crash(si_code: &'static str) -> Effect {
    Effect {
        severity: Severity::Error,
        errno: None,
        stage: Stage::AfterExec,
        si_code: Some(si_code),
    }
}

/// One rule: stable id, quote and source.
pub(super) struct Rule {
    pub(super) id: &'static str,
    pub(super) quote: &'static str,
    pub(super) source: &'static str,
}

pub(super) const R_PERMISSION: Rule = Rule {
    id: "exec-permission",
    quote: "execve(2): EACCES: Execute permission is denied for the file or a script or ELF interpreter.",
    source: "execve(2); fs/exec.c: do_open_execat",
};
pub(super) const R_NOT_ELF: Rule = Rule {
    id: "not-elf",
    quote: "elf(5): EI_MAG0..EI_MAG3: the first four bytes of the magic number are 0x7f, 'E', 'L', 'F'. \
            No binary handler (ELF, #! script, binfmt_misc) recognises other files.",
    source: "fs/exec.c: search_binary_handler; load_elf_binary: memcmp(e_ident, ELFMAG, SELFMAG)",
};
pub(super) const R_SCRIPT_INTERP: Rule = Rule {
    id: "script-interpreter",
    quote: "execve(2): a script starts with \"#!interpreter [optional-arg]\"; the interpreter must be \
            a valid pathname for an executable file.",
    source: "fs/binfmt_script.c: load_script → open_exec(interp)",
};
pub(super) const R_TRUNCATED: Rule = Rule {
    id: "header-truncated",
    quote: "elf(5): the ELF header (Elf64_Ehdr, 64 bytes; Elf32_Ehdr, 52 bytes) is at the start of \
            the file. The kernel reads the first BINPRM_BUF_SIZE bytes into a zeroed buffer.",
    source: "fs/exec.c: prepare_binprm; fs/binfmt_elf.c: load_elf_binary",
};
pub(super) const R_CLASS: Rule = Rule {
    id: "elf-class",
    quote: "elf(5): EI_CLASS identifies the architecture for this binary: ELFCLASS32 or ELFCLASS64.",
    source: "elf(5); the kernel picks the layout from e_machine (elf_check_arch), not EI_CLASS",
};
pub(super) const R_DATA: Rule = Rule {
    id: "elf-data",
    quote: "elf(5): EI_DATA specifies the data encoding of the processor-specific data in the file: \
            ELFDATA2LSB (1) or ELFDATA2MSB (2).",
    source: "elf(5); the kernel reads headers in its own byte order",
};
pub(super) const R_TYPE: Rule = Rule {
    id: "elf-type",
    quote: "if (elf_ex->e_type != ET_EXEC && elf_ex->e_type != ET_DYN) goto out; /* -ENOEXEC */",
    source: "fs/binfmt_elf.c: load_elf_binary",
};
pub(super) const R_MACHINE: Rule = Rule {
    id: "elf-machine",
    quote: "if (!elf_check_arch(elf_ex)) goto out; /* -ENOEXEC */",
    source: "fs/binfmt_elf.c: load_elf_binary",
};
pub(super) const R_PHENTSIZE: Rule = Rule {
    id: "phentsize",
    quote: "If the size of this structure has changed, then punt, since we will be doing the wrong \
            thing: if (elf_ex->e_phentsize != sizeof(struct elf_phdr)) goto out;",
    source: "fs/binfmt_elf.c: load_elf_phdrs",
};
pub(super) const R_PHNUM: Rule = Rule {
    id: "phnum",
    quote: "Sanity check the number of program headers and their total size: \
            size = sizeof(struct elf_phdr) * e_phnum; if (size == 0 || size > 65536) goto out;",
    source: "fs/binfmt_elf.c: load_elf_phdrs",
};
pub(super) const R_PHDRS_EOF: Rule = Rule {
    id: "phdrs-beyond-eof",
    quote: "retval = elf_read(elf_file, elf_phdata, size, elf_ex->e_phoff); /* a short read fails */",
    source: "fs/binfmt_elf.c: load_elf_phdrs",
};
pub(super) const R_INTERP_SIZE: Rule = Rule {
    id: "interp-size",
    quote: "if (elf_ppnt->p_filesz > PATH_MAX || elf_ppnt->p_filesz < 2) goto out_free_ph; /* -ENOEXEC */",
    source: "fs/binfmt_elf.c: load_elf_binary",
};
pub(super) const R_INTERP_EOF: Rule = Rule {
    id: "interp-beyond-eof",
    quote: "retval = elf_read(bprm->file, elf_interpreter, elf_ppnt->p_filesz, elf_ppnt->p_offset); \
            /* a short read is -EIO */",
    source: "fs/binfmt_elf.c: load_elf_binary",
};
pub(super) const R_INTERP_NUL: Rule = Rule {
    id: "interp-not-terminated",
    quote: "elf(5): PT_INTERP: the location and size of a null-terminated pathname to invoke as an \
            interpreter. Kernel: make sure path is NULL terminated, else -ENOEXEC.",
    source: "fs/binfmt_elf.c: load_elf_binary",
};
pub(super) const R_INTERP_MISSING: Rule = Rule {
    id: "interp-missing",
    quote: "interpreter = open_exec(elf_interpreter); retval = PTR_ERR(interpreter); \
            if (IS_ERR(interpreter)) goto out_free_ph;",
    source: "fs/binfmt_elf.c: load_elf_binary",
};
pub(super) const R_INTERP_SHORT: Rule = Rule {
    id: "interp-short",
    quote: "retval = elf_read(interpreter, interp_elf_ex, sizeof(*interp_elf_ex), 0); \
            /* a short read is -EIO */",
    source: "fs/binfmt_elf.c: load_elf_binary",
};
pub(super) const R_INTERP_ACCESS: Rule = Rule {
    id: "interp-not-executable",
    quote: "interpreter = open_exec(elf_interpreter); /* -EACCES: not a regular file, or no \
            execute permission */",
    source: "fs/binfmt_elf.c: load_elf_binary → fs/exec.c: do_open_execat",
};
pub(super) const R_INTERP_BAD: Rule = Rule {
    id: "interp-bad-elf",
    quote: "Some simple consistency checks for the interpreter: retval = -ELIBBAD; \
            not an ELF interpreter, or !elf_check_arch(interp_elf_ex).",
    source: "fs/binfmt_elf.c: load_elf_binary",
};
pub(super) const R_INTERP_ORDER: Rule = Rule {
    id: "interp-order",
    quote: "elf(5): PT_INTERP may not occur more than once in a file. If it is present, it must \
            precede any loadable segment entry.",
    source: "elf(5)",
};
pub(super) const R_DYN_EXTENT: Rule = Rule {
    id: "dyn-zero-extent",
    quote: "total_size = total_mapping_size(elf_phdata, elf_ex->e_phnum); \
            if (!total_size) { retval = -EINVAL; goto out_free_dentry; }",
    source: "fs/binfmt_elf.c: load_elf_binary (ET_DYN)",
};
pub(super) const R_CONGRUENCE: Rule = Rule {
    id: "load-congruence",
    quote: "elf(5): Loadable process segments must have congruent values for p_vaddr and p_offset, \
            modulo the page size.",
    source: "elf_map: off = p_offset - ELF_PAGEOFFSET(p_vaddr); vm_mmap: if (offset_in_page(offset)) return -EINVAL;",
};
pub(super) const R_OFFSET_OVERFLOW: Rule = Rule {
    id: "load-offset-overflow",
    quote: "vm_mmap: if (unlikely(offset + PAGE_ALIGN(len) < offset)) return -EINVAL;",
    source: "mm/util.c: vm_mmap (from elf_map)",
};
pub(super) const R_MIN_ADDR: Rule = Rule {
    id: "load-below-mmap-min-addr",
    quote: "cap_mmap_addr: if (addr < dac_mmap_min_addr) and the task lacks CAP_SYS_RAWIO: \
            ret = -EPERM (vm.mmap_min_addr).",
    source: "security/commoncap.c: cap_mmap_addr (from vm_mmap / vm_brk_flags)",
};
pub(super) const R_MAP_TASK_SIZE: Rule = Rule {
    id: "load-map-beyond-task-size",
    quote: "__get_unmapped_area: if (len > TASK_SIZE) return -ENOMEM; \
            if (addr > TASK_SIZE - len) return -ENOMEM;",
    source: "mm/mmap.c: __get_unmapped_area (from elf_map → vm_mmap)",
};
pub(super) const R_BSS_TASK_SIZE: Rule = Rule {
    id: "load-bss-beyond-task-size",
    quote: "elf_load: if (p_memsz > p_filesz) error = vm_brk_flags(zero_start, zero_end - zero_start, ...); \
            __get_unmapped_area: if (addr > TASK_SIZE - len) return -ENOMEM;",
    source: "fs/binfmt_elf.c: elf_load → mm/mmap.c: vm_brk_flags",
};
pub(super) const R_BSS_COMMIT: Rule = Rule {
    id: "load-bss-too-large",
    quote: "do_brk_flags: if (security_vm_enough_memory_mm(mm, len >> PAGE_SHIFT)) return -ENOMEM; \
            (vm.overcommit_memory 0: one request may not exceed RAM + swap)",
    source: "fs/binfmt_elf.c: elf_load → mm/mmap.c: vm_brk_flags → do_brk_flags",
};
pub(super) const R_FILE_RANGE: Rule = Rule {
    id: "load-file-range",
    quote: "elf_load: Zero the end of the last mapped page but ignore any errors if the segment \
            isn't writable: if (padzero(zero_start) && (prot & PROT_WRITE)) return -EFAULT;",
    source: "fs/binfmt_elf.c: elf_load (pages past the end of the file cannot be touched: SIGBUS)",
};
pub(super) const R_FILESZ: Rule = Rule {
    id: "load-filesz-gt-memsz",
    quote: "elf(5): PT_LOAD: The file size may not be larger than the memory size. Kernel: \
            if (... || elf_ppnt->p_filesz > elf_ppnt->p_memsz || ...) { retval = -EINVAL; ... }",
    source: "fs/binfmt_elf.c: load_elf_binary",
};
pub(super) const R_RANGE: Rule = Rule {
    id: "load-beyond-task-size",
    quote: "Check to see if the section's size will overflow the allowed task size: \
            if (BAD_ADDR(k) || ... || p_memsz > TASK_SIZE || TASK_SIZE - p_memsz < k) retval = -EINVAL;",
    source: "fs/binfmt_elf.c: load_elf_binary",
};
pub(super) const R_ENTRY: Rule = Rule {
    id: "entry-beyond-task-size",
    quote: "elf_entry = e_entry; if (BAD_ADDR(elf_entry)) { retval = -EINVAL; goto out_free_dentry; } \
            where BAD_ADDR(x) is x >= TASK_SIZE",
    source: "fs/binfmt_elf.c: load_elf_binary",
};
pub(super) const R_NO_LOAD: Rule = Rule {
    id: "no-load",
    quote: "elf(5): PT_LOAD: the array element specifies a loadable segment. Without one nothing \
            is mapped, yet the kernel starts the program at e_entry.",
    source: "fs/binfmt_elf.c: load_elf_binary (no PT_LOAD is not an error)",
};
pub(super) const R_ENTRY_OUTSIDE: Rule = Rule {
    id: "entry-outside-load",
    quote: "elf(5): e_entry gives the virtual address to which the system first transfers control. \
            It must lie in an executable PT_LOAD segment.",
    source: "elf(5); start_thread(regs, elf_entry, ...)",
};
pub(super) const R_EXEC_STACK: Rule = Rule {
    id: "exec-stack",
    quote: "elf(5): PT_GNU_STACK: GNU extension which is used by the Linux kernel to control the \
            state of the stack via the flags set in the p_flags member.",
    source: "load_elf_binary: executable_stack = EXSTACK_ENABLE_X; \
             setup_arg_pages warns \"started with executable stack\"",
};
pub(super) const R_ALIGN_POW2: Rule = Rule {
    id: "align-not-power-of-two",
    quote: "elf(5): p_align: Values of zero and one mean no alignment is required. Otherwise, \
            p_align should be a positive, integral power of two.",
    source: "elf(5); maximum_alignment skips non-power-of-two alignments as invalid",
};
pub(super) const R_ALIGN_CONGRUENCE: Rule = Rule {
    id: "align-congruence",
    quote: "elf(5): p_align: ... and p_vaddr should equal p_offset, modulo p_align.",
    source: "elf(5)",
};
pub(super) const R_ORDER: Rule = Rule {
    id: "load-order",
    quote: "elf(5): Loadable segment entries in the program header table appear in ascending \
            order, sorted on the p_vaddr member.",
    source: "elf(5)",
};
pub(super) const R_OVERLAP: Rule = Rule {
    id: "load-overlap",
    quote: "elf(5): PT_LOAD: the bytes from the file are mapped to the beginning of the memory \
            segment; segments that share addresses map over each other (later ones use MAP_FIXED).",
    source: "fs/binfmt_elf.c: load_elf_binary (MAP_FIXED after the first PT_LOAD)",
};

pub(super) const CRASH_MAPERR: Effect = crash("SEGV_MAPERR");
pub(super) const CRASH_ACCERR: Effect = crash("SEGV_ACCERR");
