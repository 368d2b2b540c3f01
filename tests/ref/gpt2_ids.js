#!/usr/bin/env node
// The GPT-2 ids txl's bpe encoder is held to: the texts of tests/data/vocab/gpt2/*.txt and
// a set of random strings (seeded; letters, numbers, marks and whitespace of many scripts,
// emoji, contractions) encoded by tiktoken's npm package (its Rust core in WASM, encoding
// "gpt2"), checked against the npm package gpt-3-encoder where that agrees with tiktoken
// (it differs only where JavaScript's \s is not Unicode's White_Space). Writes
// tests/data/vocab/gpt2_expected.json.gz: {"files": {name: ids}, "random": [[text, ids]]}.
// Usage (make vocab-ref): NODE_PATH=<a dir where `npm install tiktoken gpt-3-encoder` ran>
//   node tests/ref/gpt2_ids.js
const fs = require("fs");
const path = require("path");
const zlib = require("zlib");
const { get_encoding } = require("tiktoken");
const g3 = require("gpt-3-encoder");

const dir = "tests/data/vocab/gpt2";
const enc = get_encoding("gpt2");
const ids = (s) => Array.from(enc.encode(s));
let disagree = 0;
const check = (name, s, t) => {
  const g = g3.encode(s);
  if (g.length !== t.length || g.some((x, i) => x !== t[i])) disagree++;
};

const files = {};
for (const f of fs.readdirSync(dir).filter((f) => f.endsWith(".txt")).sort()) {
  const s = fs.readFileSync(path.join(dir, f), "utf8");
  files[f] = ids(s);
  check(f, s, files[f]);
}

// random strings: a seeded xorshift over pools of characters
let st = 0x9e3779b97f4a7c15n;
const rnd = (n) => {
  st ^= st << 13n; st &= (1n << 64n) - 1n; st ^= st >> 7n; st ^= st << 17n; st &= (1n << 64n) - 1n;
  return Number(st % BigInt(n));
};
const cps = (lo, hi) => Array.from({ length: hi - lo + 1 }, (_, i) => String.fromCodePoint(lo + i));
const pools = [
  [..."abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"], [..."0123456789"],
  [..." "], [..."   \n\n\t\r"], [..."'"], ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S"],
  [..."!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~"], cps(0xc0, 0xff), cps(0x391, 0x3c9), cps(0x410, 0x44f),
  cps(0x4e00, 0x4e40), cps(0xac00, 0xac20), cps(0x627, 0x64a), cps(0x915, 0x939),
  cps(0x93e, 0x94d), cps(0x300, 0x36f), cps(0x660, 0x669), cps(0xff10, 0xff19),
  cps(0x2160, 0x216f), [..."½¼¾²³¹"], cps(0x1f600, 0x1f64f), ["\u200d", "\ufe0f", "\u20e3"],
  ["\u00a0", "\u0085", "\u1680", "\u180e", "\u2000", "\u2005", "\u200a", "\u2028", "\u2029",
   "\u202f", "\u205f", "\u3000", "\ufeff", "\u200b", "\u000b", "\u000c", "\u001c", "\u001f"],
];
const random = [];
for (let k = 0; k < 1500; k++) {
  let s = "";
  const n = 1 + rnd(30);
  for (let i = 0; i < n; i++) {
    const p = pools[rnd(pools.length)];
    const m = 1 + rnd(3);
    for (let j = 0; j < m; j++) s += p[rnd(p.length)];
  }
  const t = ids(s);
  random.push([s, t]);
  check("random", s, t);
}
const out = JSON.stringify({ files, random });
fs.writeFileSync("tests/data/vocab/gpt2_expected.json.gz", zlib.gzipSync(out, { level: 9 }));
console.error(`gpt2_ids.js: ${Object.keys(files).length} files, ${random.length} random strings; ` +
  `gpt-3-encoder differs from tiktoken on ${disagree}`);
