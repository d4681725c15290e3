// strata against llama.cpp itself (the build node-llama-cpp bundles, installed on first use into
// the build tree) on synthetic models of every family strata runs, in every residency mode the
// CPU can take: the same token ids in both engines, compared by id so that tokenizers play no
// part.
//
// For each case of CASES: `strata synth` writes the model; llama.cpp evaluates a prompt of a few
// dozen tokens teacher-forced (every position's logits, one batch) and continues a few prompts
// greedily, keeping each step's top-1/top-2 margin; strata does the same through `strata run
// --prompt-ids --logits-out --greedy --json`, resident and streaming (ffn-stream for dense
// models, expert-stream for MoE, under a --ram budget too small to hold them).
//
// Bounds, the golden tests' (engine_greedy_golden_test.cpp, engine_kld_golden_test.cpp): for
// float weights the reference's top-10 logits within 0.25, mean KL <= 1e-4, top-1 >= 98%; for
// quantized weights within 8% of the top logit, mean KL <= 0.1, top-1 >= 88%. Greedy ids must
// be equal; a continuation may part only at a step where the reference's own top-1/top-2 margin
// is below what the logit tolerance can swap (twice it for float weights; 5 logits for dense
// quantized files, 10 for MoE, where a router near-tie swaps an expert).
//
// usage: node compare_with_llama_cpp.mjs --strata BIN --deps DIR [--only REGEX]
//   --deps: where the npm packages are installed when missing (a cache under the build tree)
//   --only: run only the cases whose name matches
// Exit status: 0 when every case that ran passed, 1 otherwise (one line per failure).
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import { LLAMA_VERSION, loadLlamaCpp, reexecUnderNewerNode } from "./llama_cpp_peer.mjs";
import { commandLine } from "./support.mjs";

// The llama.cpp build to compare with: node-llama-cpp's prebuilt CPU binaries for linux-x64
// (llama_cpp_peer.mjs).

// One row a case: the synth preset, whether it is MoE (which streaming mode it takes), the
// weight type, and `layers` to override the preset's. The two-layer dense presets get four: ffn-
// stream mode has two FFN slots, and with two layers both would stay in them, so a streamed run
// would read nothing again. `pending`: the preset is still being added; while strata does not
// know it, the case is reported as skipped rather than failed. `nextn`: multi-token-prediction
// blocks appended after the trunk, as the reference converter writes them (both engines run the
// trunk only).
const CASES = [
  { preset: "tiny", moe: false, type: "F32", layers: 4 },
  { preset: "tiny", moe: false, type: "Q8_0", layers: 4 },
  { preset: "tiny-moe", moe: true, type: "F32", layers: 4 },
  { preset: "tiny-qwen2", moe: false, type: "F32", layers: 4 },
  { preset: "tiny-qwen3", moe: false, type: "F32", layers: 4 },
  { preset: "tiny-qwen2moe", moe: true, type: "F32", layers: 4 },
  { preset: "tiny-qwen3moe", moe: true, type: "F32", layers: 4 },
  { preset: "tiny-qwen3moe", moe: true, type: "Q8_0", layers: 4 },
  { preset: "tiny-gpt-oss", moe: true, type: "F32" },
  { preset: "tiny-gpt-oss", moe: true, type: "MXFP4_MOE" },
  { preset: "tiny-qwen35", moe: false, type: "F32" },
  { preset: "tiny-qwen35moe", moe: true, type: "F32" },
  { preset: "tiny-qwen35moe", moe: true, type: "Q8_0" },
  { preset: "tiny-qwen35moe", moe: true, type: "Q8_0", nextn: 1 },
  { preset: "tiny-qwen3next", moe: true, type: "F32" },
  { preset: "tiny-qwen3next", moe: true, type: "Q8_0" },
  { preset: "tiny-qwen3next-qkv", moe: true, type: "F32" },
  { preset: "tiny-qwen3next", moe: true, type: "Q8_0", nextn: 1 },
  { preset: "tiny-glm4moe", moe: true, type: "F32" },
  { preset: "tiny-glm4moe", moe: true, type: "Q8_0" },
  { preset: "tiny-glm4moe", moe: true, type: "Q8_0", nextn: 1 },
  { preset: "tiny-deepseek2", moe: true, type: "F32" },
  { preset: "tiny-deepseek2", moe: true, type: "Q8_0" },
  { preset: "tiny-deepseek2-kvb", moe: true, type: "F32" },
];

// Text the reference tokenizes into the prompts' ids (the ids, not the text, go to both).
const FORCED_TEXT =
  "Once upon a time there was a little robot who lived in a quiet town by the sea. " +
  "Every morning it walked to the harbour to count the boats.";
const GREEDY_TEXTS = ["Once upon a time", "The quick brown fox", "In the beginning"];
const GREEDY_STEPS = 16;
const TOP_K = 10;

const { args, fail } = commandLine("compare_with_llama_cpp", ["strata", "deps"]);

// Runs this script again under Node.js 20 when the node running it is older.
// ---- the reference ----

// The logits of a `next` result (a Map over the whole vocabulary) as a Float32Array indexed by
// token id.
function logitArray(map) {
  const a = new Float32Array(map.size);
  for (const [id, v] of map) a[id] = v;
  return a;
}

// Top-1 id (the lowest id among equals, as strata's greedy sampler picks) and its margin over
// the second.
function top2(logits) {
  let best = 0;
  for (let i = 1; i < logits.length; ++i) if (logits[i] > logits[best]) best = i;
  let second = -Infinity;
  for (let i = 0; i < logits.length; ++i) if (i !== best && logits[i] > second) second = logits[i];
  return { id: best, margin: logits[best] - second };
}

async function reference(llama, modelPath, greedyPrompts, forced) {
  const model = await llama.loadModel({ modelPath });
  try {
    // Flash attention off: strata follows llama.cpp's attention without it. With it, llama.cpp's
    // CPU path rounds differently (mean KL 5e-5 instead of 5e-7 on the tiny llama file, logits
    // 0.1 apart instead of 0.015).
    // One thread: the tiny models gain nothing from more, and on a busy machine ggml's spinning
    // worker threads make each single-token step take hundreds of milliseconds.
    const ctx = await model.createContext({ contextSize: 256, batchSize: 256, threads: 1, flashAttention: false });
    const seq = ctx.getSequence();
    const evalAll = async (ids) => {
      const res = await seq.controlledEvaluate(ids.map((t) => [t, { generateNext: { logits: true } }]));
      return res.map((r) => logitArray(r.next.logits));
    };
    await seq.clearHistory();
    const forcedLogits = await evalAll(forced);
    const nVocab = forcedLogits[0].length;
    const greedy = [];
    for (const prompt of greedyPrompts) {
      await seq.clearHistory();
      const steps = [];
      let logits = (await evalAll(prompt)).at(-1);
      for (let s = 0; s < GREEDY_STEPS; ++s) {
        const t = top2(logits);
        steps.push(t);
        if (model.isEogToken(t.id)) {
          steps.eog = true;
          break;
        }
        if (s + 1 < GREEDY_STEPS) logits = (await evalAll([t.id]))[0];
      }
      greedy.push(steps);
    }
    await ctx.dispose();
    return { nVocab, forcedLogits, greedy };
  } finally {
    await model.dispose();
  }
}

// The prompts' ids from the reference's tokenizer, each after BOS when the model has one.
async function promptIds(llama, modelPath) {
  const model = await llama.loadModel({ modelPath, vocabOnly: true });
  try {
    const bos = model.tokens.bos;
    const ids = (text) => [...(bos != null ? [bos] : []), ...model.tokenize(text)];
    return { forced: ids(FORCED_TEXT), greedy: GREEDY_TEXTS.map(ids) };
  } finally {
    await model.dispose();
  }
}

// ---- strata ----

function strata(argv, env = {}) {
  return spawnSync(args.strata, argv, {
    encoding: "utf8",
    env: { ...process.env, ...env },
    maxBuffer: 64 << 20,
  });
}

// The smallest budget a "too small" error names ("need at least N KiB"); 0 when it names none.
function namedMinimum(stderr) {
  const m = /need at least ([0-9.]+) (B|KiB|MiB|GiB)/.exec(stderr);
  if (!m) return 0;
  const scale = { B: 1, KiB: 1024, MiB: 1 << 20, GiB: 1 << 30 }[m[2]];
  return Math.ceil((Number(m[1]) + 0.005) * scale); // two decimals: up to half a hundredth low
}

// Runs `strata run` on `ids` in `mode`; returns {json, logits (Float32Array) when asked}.
function strataRun(modelPath, mode, ids, { logitsFile = null, steps = 0 } = {}) {
  const argv = ["run", modelPath, "--prompt-ids", ids.join(","), "--greedy", "-n", String(steps), "--json"];
  argv.push("-t", "2", "--ctx", "256");
  if (logitsFile) argv.push("--logits-out", logitsFile);
  if (mode === "resident") return parseRun(strata(argv), mode, logitsFile);
  if (mode === "ffn-stream") argv.push("--mode", "ffn-stream");
  // A budget 256 KiB above the smallest, less than one streamed layer or the experts of one:
  // the streamed weights do not fit, so they are read from the file as the layers need them.
  // The smallest moves a little between runs with the process's measured size; a run that
  // finds it higher is retried with the figure it names, and one whose budget turned out to
  // hold every streamed weight (it read nothing: the process measured smaller than when the
  // smallest was named) with less room above it.
  let r = strata([...argv, "--ram", "1K"]);
  let smallest = namedMinimum(r.stderr);
  if (r.status !== 1 || !smallest) throw new Error(`strata named no minimum budget:\n${r.stderr}`);
  for (const room of [256 << 10, 64 << 10, 16 << 10]) {
    for (let attempt = 0; attempt < 4; ++attempt) {
      r = strata([...argv, "--ram", `${Math.ceil((smallest + room) / 1024)}K`]);
      const named = namedMinimum(r.stderr);
      if (r.status === 0 || !named) break;
      smallest = named;
    }
    if (r.status !== 0 || JSON.parse(r.stdout).disk_bytes_read > 0) break;
  }
  return parseRun(r, mode, logitsFile);
}

function parseRun(r, mode, logitsFile) {
  if (r.status !== 0) throw new Error(`strata run (${mode}) failed:\n${r.stderr}`);
  const json = JSON.parse(r.stdout);
  if (json.mode !== mode) throw new Error(`strata ran in mode ${json.mode}, not ${mode}`);
  if (mode !== "resident" && !(json.disk_bytes_read > 0))
    throw new Error(`strata ran in mode ${mode} but read nothing from the file`);
  const out = { json };
  if (logitsFile) {
    const b = fs.readFileSync(logitsFile);
    out.logits = new Float32Array(b.buffer, b.byteOffset, b.length / 4);
  }
  return out;
}

// ---- comparison ----

function logSoftmax(x) {
  let max = -Infinity;
  for (const v of x) max = Math.max(max, v);
  let sum = 0;
  for (const v of x) sum += Math.exp(v - max);
  const lse = max + Math.log(sum);
  return Float64Array.from(x, (v) => v - lse);
}

// Teacher-forced figures: max |diff| over the reference's top-k logits (absolute, and relative
// to the top logit), top-1 agreement and mean KL(reference || strata). With `swapTol` (float MoE
// models) a position whose logits differ by more than swapTol is counted as an expert swap and
// left out of max |diff| and mean KL: there the two engines' last-bit differences have tipped a
// router near-tie to another expert (the tiny qwen3moe file has one, a gap of 4.5e-4 between its
// 2nd and 3rd expert at one position), which moves that position's logits by several units. The
// caller bounds how many swaps there may be; top-1 agreement counts every position. For
// quantized MoE files the swap threshold is relative (swapRelTol of the top logit), as their bound is.
function compareForced(ref, got, nVocab, swapTol = Infinity, swapRelTol = Infinity) {
  const n = ref.length;
  if (got.length !== n * nVocab) throw new Error(`strata wrote ${got.length} logits, not ${n} x ${nVocab}`);
  let maxDiff = 0;
  let maxRel = 0;
  let top1 = 0;
  let kl = 0;
  const swaps = [];
  for (let p = 0; p < n; ++p) {
    const r = ref[p];
    const g = got.subarray(p * nVocab, (p + 1) * nVocab);
    if (top2(g).id === top2(r).id) ++top1;
    const order = [...r.keys()].sort((a, b) => r[b] - r[a] || a - b).slice(0, TOP_K);
    let diff = 0;
    let rel = 0;
    for (const id of order) {
      const d = Math.abs(g[id] - r[id]);
      diff = Math.max(diff, d);
      rel = Math.max(rel, d / Math.abs(r[order[0]]));
    }
    if (diff > swapTol || rel > swapRelTol) {
      swaps.push(p);
      continue;
    }
    maxDiff = Math.max(maxDiff, diff);
    maxRel = Math.max(maxRel, rel);
    const lr = logSoftmax(r);
    const lg = logSoftmax(g);
    let k = 0;
    for (let i = 0; i < nVocab; ++i) k += Math.exp(lr[i]) * (lr[i] - lg[i]);
    kl += k;
  }
  return { maxDiff, maxRel, top1: top1 / n, kl: kl / (n - swaps.length), swaps };
}

// Greedy ids against the reference's steps: the steps matched, and an error when they part at a
// step whose reference margin is at least marginTol. `steps.eog`: the reference ended on an
// end-of-generation token, which strata's answer may leave out (it stops there too).
function compareGreedy(steps, generated, marginTol) {
  for (let s = 0; s < steps.length; ++s) {
    if (generated[s] === steps[s].id) continue;
    if (s >= generated.length) {
      if (steps.eog && s === steps.length - 1) break;
      return { matched: s, error: `strata stopped after ${s} tokens, llama.cpp went on` };
    }
    if (steps[s].margin >= marginTol) {
      const margin = steps[s].margin.toFixed(3);
      const error = `step ${s}: strata ${generated[s]}, llama.cpp ${steps[s].id} (its margin ${margin})`;
      return { matched: s, error };
    }
    return { matched: s, parted: true };
  }
  if (generated.length > steps.length) return { matched: steps.length, error: "strata generated more tokens" };
  return { matched: steps.length };
}

function bounds(c) {
  if (["F32", "F16", "BF16"].includes(c.type)) {
    const bf16 = c.type === "BF16";
    const logitTol = bf16 ? 1.0 : 0.25;
    // MoE: expert swaps (compareForced) at no more than one position in 50.
    const maxSwapShare = c.moe ? 0.02 : 0;
    const maxKl = bf16 ? 5e-3 : 1e-4;
    return { float: true, logitTol, marginTol: 2 * logitTol, maxKl, minTop1: bf16 ? 0.95 : 0.98, maxSwapShare };
  }
  // Quantized MoE: both engines quantize the activations for their dot products, each its own
  // way, so router logits differ by about 1e-2 rather than 1e-6 and near-ties tip more often
  // (a swapped expert also moves the next positions through the cache): up to 6% of positions.
  return { float: false, relTol: 0.08, marginTol: c.moe ? 10 : 5, maxKl: 0.1, minTop1: 0.88, maxSwapShare: c.moe ? 0.06 : 0 };
}

// "tiny-qwen35moe Q8_0", "tiny-qwen35moe-nextn1 Q8_0": what --only matches and reports name.
function caseName(c) {
  return `${c.preset}${c.nextn ? `-nextn${c.nextn}` : ""} ${c.type}`;
}

async function runCase(llama, c, dir) {
  const name = caseName(c);
  const modelPath = path.join(dir, `${name.replace(" ", "-")}.gguf`);
  const shape = c.layers ? ["--layers", String(c.layers)] : [];
  if (c.nextn) shape.push("--nextn", String(c.nextn));
  const synth = strata(["synth", "--preset", c.preset, ...shape, "--type", c.type, "--seed", "7", "--threads", "2"]
    .concat(["-o", modelPath]));
  if (synth.status !== 0) {
    if (c.pending && /unknown preset/.test(synth.stderr)) {
      return { name, skipped: `strata has no preset ${c.preset} yet` };
    }
    return { name, errors: [`strata synth failed: ${synth.stderr.trim()}`] };
  }
  let ids;
  let ref;
  try {
    ids = await promptIds(llama, modelPath);
    ref = await reference(llama, modelPath, ids.greedy, ids.forced);
  } catch (e) {
    return { name, errors: [`llama.cpp could not run the model: ${e.message}`] };
  }
  const b = bounds(c);
  const modes = ["resident", c.moe ? "expert-stream" : "ffn-stream"];
  const lines = [];
  const errors = [];
  for (const mode of modes) {
    try {
      const logitsFile = path.join(dir, `${c.preset}-${c.type}-${mode}.f32`);
      const forced = strataRun(modelPath, mode, ids.forced, { logitsFile });
      const swapTol = b.maxSwapShare > 0 && b.float ? b.logitTol : Infinity;
      const swapRelTol = b.maxSwapShare > 0 && !b.float ? b.relTol : Infinity;
      const f = compareForced(ref.forcedLogits, forced.logits, ref.nVocab, swapTol, swapRelTol);
      const greedy = ids.greedy.map((p, i) => {
        const run = strataRun(modelPath, mode, p, { steps: GREEDY_STEPS });
        return compareGreedy(ref.greedy[i], run.json.generated_ids, b.marginTol);
      });
      const matched = greedy.map((g) => g.matched + (g.parted ? "~" : "")).join("/");
      const n = ids.forced.length;
      const swaps = f.swaps.length ? ` (expert swap at ${f.swaps.join(",")} of ${n})` : "";
      lines.push(
        `${name.padEnd(26)} ${mode.padEnd(13)} logits max|diff| ${f.maxDiff.toFixed(4)}` +
          ` (${(100 * f.maxRel).toFixed(2)}% of top)${swaps}  top-1 ${(100 * f.top1).toFixed(1)}%` +
          `  mean KL ${f.kl.toExponential(2)}  greedy ${matched} of ${GREEDY_STEPS}`,
      );
      const where = `${name} ${mode}`;
      if (b.float ? f.maxDiff > b.logitTol : f.maxRel > b.relTol) {
        const bound = b.float ? b.logitTol : `${100 * b.relTol}% of the top logit`;
        errors.push(`${where}: teacher-forced logits differ by ${f.maxDiff.toFixed(4)} (bound ${bound})`);
      }
      if (f.swaps.length > 0 && f.swaps.length > Math.max(1, Math.floor(b.maxSwapShare * n))) {
        const what = "more than router near-ties explain";
        const beyond = b.float ? b.logitTol : `${100 * b.relTol}% of the top logit`;
        errors.push(`${where}: logits beyond ${beyond} at ${f.swaps.length} of ${n} positions (${what})`);
      }
      if (f.top1 < b.minTop1) {
        errors.push(`${where}: top-1 agreement ${(100 * f.top1).toFixed(1)}% < ${100 * b.minTop1}%`);
      }
      if (!(f.kl <= b.maxKl)) errors.push(`${where}: mean KL ${f.kl.toExponential(3)} > ${b.maxKl}`);
      greedy.forEach((g, i) => {
        if (g.error) errors.push(`${where}: greedy prompt ${i} ("${GREEDY_TEXTS[i]}"): ${g.error}`);
      });
    } catch (e) {
      errors.push(`${name} ${mode}: ${e.message}`);
    }
  }
  return { name, lines, errors };
}

async function main() {
  reexecUnderNewerNode("compare_with_llama_cpp", args.deps, fail);
  const t0 = Date.now();
  const llama = await loadLlamaCpp(args.deps, fail);
  const only = args.only ? new RegExp(args.only) : null;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "strata-llama-cpp-"));
  let failures = 0;
  let ran = 0;
  try {
    for (const c of CASES) {
      if (only && !only.test(caseName(c))) continue;
      const r = await runCase(llama, c, dir);
      if (r.skipped) {
        console.log(`${r.name.padEnd(26)} skipped: ${r.skipped}`);
        continue;
      }
      ++ran;
      for (const l of r.lines ?? []) console.log(l);
      for (const e of r.errors) console.log(`FAIL ${e}`);
      failures += r.errors.length;
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
    await llama.dispose();
  }
  console.log(`compare_with_llama_cpp: ${ran} cases against llama.cpp (node-llama-cpp ${LLAMA_VERSION}), ` +
    `${failures} failures, ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  if (failures) fail(`${failures} comparisons with llama.cpp failed (see FAIL lines)`);
  if (ran === 0) fail("no case ran");
}

main().catch((e) => fail(e.stack ?? String(e)));
