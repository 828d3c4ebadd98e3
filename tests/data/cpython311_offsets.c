/* CPython 3.11's struct offsets on this machine, from its internal headers
 * (python3.11-dev), printed as kdiag's python_stacks::Layout prints itself
 * (Debug): tests/diagnose_runtimes.rs compares the two. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "internal/pycore_runtime.h"
#include "internal/pycore_interp.h"
#include "internal/pycore_frame.h"
#include "internal/pycore_code.h"

#define O(name, t, f) printf("%s: %zu, ", name, offsetof(t, f))

/* The state bit field's word with one bit set. */
static unsigned state_word(int ascii) {
    PyASCIIObject o;
    unsigned w;
    memset(&o, 0, sizeof o);
    if (ascii)
        o.state.ascii = 1;
    else
        o.state.compact = 1;
    memcpy(&w, &o.state, sizeof w);
    return w;
}

int main(void) {
    printf("Layout { ");
    O("runtime_interpreters_head", _PyRuntimeState, interpreters.head);
    O("interp_threads_head", PyInterpreterState, threads.head);
    O("thread_next", PyThreadState, next);
    O("thread_cframe", PyThreadState, cframe);
    O("thread_native_thread_id", PyThreadState, native_thread_id);
    O("cframe_current_frame", _PyCFrame, current_frame);
    O("frame_f_code", _PyInterpreterFrame, f_code);
    O("frame_previous", _PyInterpreterFrame, previous);
    O("frame_prev_instr", _PyInterpreterFrame, prev_instr);
    O("object_ob_type", PyObject, ob_type);
    O("code_co_filename", PyCodeObject, co_filename);
    O("code_co_qualname", PyCodeObject, co_qualname);
    O("code_co_firstlineno", PyCodeObject, co_firstlineno);
    O("code_co_linetable", PyCodeObject, co_linetable);
    O("code_co_code_adaptive", PyCodeObject, co_code_adaptive);
    O("bytes_ob_size", PyVarObject, ob_size);
    O("bytes_ob_sval", PyBytesObject, ob_sval);
    O("unicode_length", PyASCIIObject, length);
    O("unicode_state", PyASCIIObject, state);
    printf("unicode_ascii_data: %zu, ", sizeof(PyASCIIObject));
    printf("unicode_compact_data: %zu, ", sizeof(PyCompactUnicodeObject));
    printf("unicode_state_ascii: %u, ", state_word(1));
    printf("unicode_state_compact: %u }\n", state_word(0));
    return 0;
}
