// tiktoken_encode.js: tiktoken's npm build (its Rust core in WASM), encoding "gpt2", on a
// text held in memory: the best of REPS encodings. usage (NODE_PATH: where tiktoken is
// installed): node tiktoken_encode.js TEXT REPS  -> "tokens seconds"
const fs = require("fs");
const { get_encoding } = require("tiktoken");
const enc = get_encoding("gpt2");
const text = fs.readFileSync(process.argv[2], "utf8");
let best = Infinity, n = 0;
for (let r = 0; r < Number(process.argv[3]); r++) {
  const t0 = process.hrtime.bigint();
  n = enc.encode(text).length;
  const dt = Number(process.hrtime.bigint() - t0) / 1e9;
  if (dt < best) best = dt;
}
console.log(`${n} ${best.toFixed(6)}`);
enc.free();
