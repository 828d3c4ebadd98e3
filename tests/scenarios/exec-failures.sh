# A shell that runs a program that does not exist, ten times a second.
# Truth: strace of the shell's children, execve failing with ENOENT.
EXPECT=exec
EVIDENCE="ENOENT"
QUICK=1
start() { sh -c 'while :; do /nonexistent/kdiag-scenario-tool 2> /dev/null; sleep 0.1; done' & PID=$!; ARGS="-p $PID --tree"; CLEANUP="kill $PID"; }
truth() { echo "the shell's children exit 127 (command not found)"; sleep 5; }
