// solve.mjs - the freeze LP through HiGHS, for bench-solvers' "highs" rows.
//
//   node solve.mjs MODEL.lp
//
// MODEL.lp is written by bench_highs.c in CPLEX LP format: minimise T, with
// the ratio columns named r0 .. r<k-1> and a first comment line
// "\ ratios K".  Solves the two lexicographic stages as the other solvers
// do: least batch time T*, then least total ratio with T <= T* (relaxed by
// 1e-9 relative if round-off leaves that infeasible), warm-started from the
// first stage's basis.  Prints "ok SECONDS T*" (SECONDS: the time spent in
// HiGHS's run() over both stages) and then the K ratios, one per line; or
// "error MESSAGE" and exit status 1.
//
// HiGHS comes from the npm package `highs` (HiGHS compiled to WebAssembly),
// installed by `npm ci` in this directory from package-lock.json.
import highsLoader from 'highs';
import { readFileSync } from 'node:fs';

function fail(message) {
  process.stdout.write(`error ${message}\n`);
  process.exit(1);
}

const file = process.argv[2];
if (!file) fail('usage: node solve.mjs MODEL.lp');
const text = readFileSync(file, 'utf8');
const header = /^\\ ratios (\d+)/.exec(text);
if (!header) fail(`${file}: no "\\ ratios K" first line`);
const ratios = Number(header[1]);

const highs = await highsLoader();
const model = highs.createModel({ format: 'lp', data: text });
model.options.set({ output_flag: false });
const optimal = highs.constants.modelStatus.optimal;

let seconds = 0; // wall time inside model.run(), summed over the stages
function solve() {
  const started = performance.now();
  const result = model.run();
  seconds += (performance.now() - started) / 1000;
  return result.modelStatus === optimal;
}

if (!solve()) fail('HiGHS: not optimal while minimising the batch time');
const colT = model.getColByName('T');
const best = model.getSolution().colValue[colT];
const ratioCol = new Int32Array(ratios);
for (let j = 0; j < ratios; j++) ratioCol[j] = model.getColByName(`r${j}`);
if (ratios > 0) {
  model.changeColCost(colT, 0);
  for (let j = 0; j < ratios; j++) model.changeColCost(ratioCol[j], 1);
  model.changeColBounds(colT, 0, best);
  if (!solve()) {
    model.changeColBounds(colT, 0, best + 1e-9 * Math.max(1, Math.abs(best)));
    if (!solve()) fail('HiGHS: not optimal while minimising the total freeze ratio');
  }
}
const x = model.getSolution().colValue;
const lines = [`ok ${seconds} ${best}`];
for (let j = 0; j < ratios; j++) lines.push(String(x[ratioCol[j]]));
process.stdout.write(lines.join('\n') + '\n');
model.dispose();
