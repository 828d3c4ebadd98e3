// outerLoop → middleStep → leafWork until the process has used argv[2]
// seconds of CPU: a JavaScript call chain whose names a profile must show
// (V8 may inline the chain into an optimised outerLoop; the names stay the
// script's). CPU time, not wall time: on a loaded machine the loop still
// outweighs node's own start-up in the samples.
function leafWork(n) { let s = 0; for (let i = 0; i < n; i++) s = (s * 31 + i) | 0; return s; }
function middleStep(n) { return leafWork(n) + 1; }
function outerLoop(cpuSecs) {
  let t = 0;
  for (let i = 1; ; i++) {
    t += middleStep(100000);
    if (i % 16 === 0) {
      const used = process.cpuUsage();
      if (used.user + used.system >= cpuSecs * 1e6) return t;
    }
  }
}
outerLoop(+process.argv[2]);
