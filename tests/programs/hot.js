// outerLoop → middleStep → leafWork for argv[2] seconds: a JavaScript call
// chain whose names a profile must show (V8 may inline the chain into an
// optimised outerLoop; the names stay the script's).
function leafWork(n) { let s = 0; for (let i = 0; i < n; i++) s = (s * 31 + i) | 0; return s; }
function middleStep(n) { return leafWork(n) + 1; }
function outerLoop(secs) {
  const end = Date.now() + secs * 1000; let t = 0;
  while (Date.now() < end) t += middleStep(100000);
  return t;
}
outerLoop(+process.argv[2]);
