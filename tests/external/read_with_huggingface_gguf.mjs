// External-reader check: models written by `strata synth` are parsed with Hugging Face's GGUF
// reader (npm @huggingface/gguf), which must see exactly what strata's own reader sees (tensor
// names, shapes, dtypes, offsets, metadata), plus layout facts checked here independently
// (alignment, tensor sizes from shape and dtype, file size, a few known metadata values).
//
// usage: node read_with_huggingface_gguf.mjs --strata BIN --describe BIN --deps DIR
//   --deps: where the npm package is installed when missing (a cache under the build tree)
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

import { commandLine, ensurePackage } from "./support.mjs";

const PACKAGE = "@huggingface/gguf@0.4.6";

const { args, fail } = commandLine("read_with_huggingface_gguf", ["strata", "describe", "deps"]);

// Runs a program; a failure ends the check with the program's name and status.
function run(program, args, options = {}) {
  try {
    return execFileSync(program, args, { encoding: "utf8", ...options });
  } catch (e) {
    fail(`${program} ${args.join(" ")} failed (${e.code ?? `exit status ${e.status}`})`);
  }
}

const TYPE_BYTES = { 0: 4, 1: 2, 30: 2 }; // F32, F16, BF16: bytes per element
const alignUp = (x, a) => ((x + a - 1n) / a) * a;

// Models to write and what they must contain, stated here independently of strata.
const CASES = [
  {
    preset: "tiny-moe", type: "F16", arch: "llama", tensors: 22,
    meta: { "llama.block_count": 2, "llama.expert_count": 8, "llama.expert_used_count": 2,
            "llama.embedding_length": 256, "general.file_type": 1 },
  },
  {
    preset: "tiny-qwen3", type: "BF16", arch: "qwen3", tensors: 24,
    meta: { "qwen3.attention.key_length": 64, "qwen3.attention.head_count": 8,
            "general.file_type": 32 },
  },
  {
    preset: "tiny-qwen2moe", type: "F32", arch: "qwen2moe", tensors: 37,
    meta: { "qwen2moe.expert_shared_feed_forward_length": 512,
            "qwen2moe.expert_feed_forward_length": 256, "general.file_type": 0 },
  },
];

function sameScalar(hf, want) {
  if (typeof want === "string" && /^-?\d+$/.test(want)) {
    return (typeof hf === "number" || typeof hf === "bigint") && BigInt(hf) === BigInt(want);
  }
  return hf === want;
}

async function checkCase(gguf, args, dir, c, errors) {
  const file = path.join(dir, `${c.preset}.gguf`);
  run(args.strata, ["synth", "--preset", c.preset, "--type", c.type, "-o", file], {
    stdio: ["ignore", "ignore", "inherit"],
  });
  const want = JSON.parse(run(args.describe, [file]));
  const { metadata, tensorInfos, tensorDataOffset } = await gguf(file, { allowLocalFile: true });
  const err = (msg) => errors.push(`${c.preset}: ${msg}`);

  // Same view as strata's reader.
  if (tensorInfos.length !== want.tensors.length) {
    err(`${tensorInfos.length} tensors, strata reads ${want.tensors.length}`);
    return;
  }
  if (BigInt(metadata.tensor_count) !== BigInt(c.tensors)) err(`tensor_count ${metadata.tensor_count}`);
  if (tensorDataOffset !== BigInt(want.tensor_data_offset)) {
    err(`tensor data at ${tensorDataOffset}, strata reads ${want.tensor_data_offset}`);
  }
  tensorInfos.forEach((t, i) => {
    const w = want.tensors[i];
    if (t.name !== w.name) err(`tensor ${i} is '${t.name}', strata reads '${w.name}'`);
    const shape = t.shape.map(String).join(",");
    if (shape !== w.shape.join(",")) err(`${t.name}: shape [${shape}] vs [${w.shape}]`);
    if (t.dtype !== w.type) err(`${t.name}: dtype ${t.dtype} vs ${w.type}`);
    if (t.offset !== BigInt(w.offset)) err(`${t.name}: offset ${t.offset} vs ${w.offset}`);
  });
  for (const [key, w] of Object.entries(want.metadata)) {
    const hf = metadata[key];
    if (hf === undefined) {
      err(`metadata key ${key} missing`);
    } else if (w !== null && typeof w === "object") {
      if (!Array.isArray(hf) || hf.length !== w.length) err(`${key}: array length differs`);
    } else if (!sameScalar(hf, w)) {
      err(`${key}: ${hf} vs ${w}`);
    }
  }

  // Independent layout facts: every tensor starts at the next aligned offset after the previous
  // one, its size follows from shape and dtype, and the file ends at the aligned end of the data.
  const alignment = BigInt(metadata["general.alignment"] ?? 32);
  let expectOffset = 0n;
  for (const t of tensorInfos) {
    const bytes = BigInt(TYPE_BYTES[t.dtype] ?? 0) * t.shape.reduce((a, b) => a * b, 1n);
    if (bytes === 0n) err(`${t.name}: unexpected dtype ${t.dtype}`);
    if (t.offset !== expectOffset) err(`${t.name}: offset ${t.offset}, expected ${expectOffset}`);
    expectOffset = alignUp(t.offset + bytes, alignment);
  }
  if (tensorDataOffset % alignment !== 0n) err(`tensor data offset ${tensorDataOffset} unaligned`);
  const size = BigInt(fs.statSync(file).size);
  if (size !== tensorDataOffset + expectOffset) {
    err(`file has ${size} bytes, the tensors end at ${tensorDataOffset + expectOffset}`);
  }
  if (metadata["general.architecture"] !== c.arch) err(`architecture ${metadata["general.architecture"]}`);
  for (const [key, value] of Object.entries(c.meta)) {
    if (metadata[key] !== value) err(`${key} = ${metadata[key]}, expected ${value}`);
  }
  const tokens = metadata["tokenizer.ggml.tokens"];
  const embd = tensorInfos.find((t) => t.name === "token_embd.weight");
  if (!Array.isArray(tokens) || tokens[0] !== "<unk>" || tokens[3] !== "<0x00>") {
    err("tokenizer.ggml.tokens does not start with <unk> ... <0x00>");
  } else if (metadata[`${c.arch}.vocab_size`] !== tokens.length || !embd ||
             embd.shape[1] !== BigInt(tokens.length)) {
    err(`vocab_size / token_embd rows disagree with ${tokens.length} tokens`);
  }
  return tensorInfos.length;
}

const entry = ensurePackage(args.deps, PACKAGE, path.join("@huggingface", "gguf", "dist", "index.mjs"), fail);
const { gguf } = await import(pathToFileURL(entry).href);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "strata-hf-gguf-"));
process.on("exit", () => fs.rmSync(dir, { recursive: true, force: true }));
const errors = [];
let checked = 0;
for (const c of CASES) checked += (await checkCase(gguf, args, dir, c, errors)) ?? 0;
if (errors.length > 0) fail(`${errors.length} mismatches:\n  ${errors.join("\n  ")}`);
console.log(`ok: ${CASES.length} synth models, ${checked} tensors read identically by ${PACKAGE}`);
