// strata against llama.cpp, two versions of it, on the same GGUF files in one run: prompt and
// generation tokens per second of each engine on the CPU with the same thread count, one table.
//
//   strata                  `strata bench` (its JSON line, not its text)
//   llama.cpp (llama-bench) a llama-bench binary the user built (for example from llama.cpp's
//                           September 2025 snapshot); its row says "not given" without --llama-bench
//   llama.cpp (npm)         the llama.cpp CPU build bundled in node-llama-cpp 3.22.1, installed on
//                           first use into --deps and driven from this script
//
// What each figure is, the same for the three: a prompt of P token ids (random, within the
// vocabulary) evaluated from an empty context, the last position's logits computed; then G
// tokens generated greedily after that prompt, one evaluation of one token each. Prompt tok/s is
// P over the prompt's time, generation tok/s is G over the G evaluations' time; each is the median
// over R repetitions that follow one untimed warm-up. llama-bench measures generation after P
// tokens of context with `-d P` (its tg test at depth P), in a second invocation.
//
// The engines run one after another, never together, each with its own defaults otherwise (flash
// attention: off in the 2025 llama-bench, "auto" in the 2026 build; both are in --json-out).
//
// usage: node bench/peers.mjs [MODEL.gguf ...] [--synth PRESET:TYPE[:LAYERS],...] [options]
// (--help lists the options). The table goes to stdout, progress to stderr. Exit status 0 when
// every engine measured every model, 1 otherwise (the table says which failed).
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

import { LLAMA_VERSION, loadLlamaCpp, reexecUnderNewerNode } from "../tests/external/llama_cpp_peer.mjs";

const TOOL = "peers";
const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

const HELP = `usage: node bench/peers.mjs [MODEL.gguf ...] [--synth PRESET:TYPE[:LAYERS],...] [options]

Measures strata, llama-bench and node-llama-cpp ${LLAMA_VERSION} (npm) on the same GGUF files, one
after another, on the CPU with the same threads, and prints one table: prompt and generation
tok/s (medians) and strata's ratio to the faster llama.cpp.

  --synth LIST          also write models with \`strata synth\` into a temporary directory, e.g.
                        1b:Q4_K_M,1b:Q8_0,qwen3moe-30b-a3b:Q4_K_M:8 (PRESET:TYPE, :LAYERS to cut
                        the preset's layers; \`strata synth --help\` lists the presets)
  --strata PATH         the strata binary (default: build/strata of this repository)
  --llama-bench PATH    a llama-bench binary to compare with (default: none; its column then says
                        "not given"). Build llama.cpp's \`llama-bench\` target yourself from the
                        llama.cpp version you want to compare with, for example:
                          cmake -S llama.cpp -B llama.cpp/build -DCMAKE_BUILD_TYPE=Release
                          cmake --build llama.cpp/build --target llama-bench -j
                        and pass llama.cpp/build/bin/llama-bench. It runs with -ngl 0 -dev none.
  --deps DIR            where node-llama-cpp is installed with npm on first use (default:
                        build/node_deps_llama_cpp, shared with the tests)
  --threads N           compute threads of every engine (default: the physical cores)
  --prompt-tokens P     prompt length (default 512)
  --gen-tokens G        tokens generated after the prompt (default 64)
  --reps R              timed repetitions after one warm-up; medians are reported (default 3)
  --json-out FILE       also write the table and each engine's details as JSON
  --help                this text`;

function fail(message) {
  console.error(`${TOOL}: ${message}`);
  process.exit(1);
}

function progress(line) {
  console.error(`${TOOL}: ${line}`);
}

// ---- arguments ----

function positiveInt(name, text) {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) fail(`--${name} must be a whole number of at least 1, not '${text}'`);
  return n;
}

// The physical cores (distinct core ids per package in /proc/cpuinfo), as strata counts them by
// default; the logical processors where that file says nothing.
function physicalCores() {
  try {
    const cores = new Set();
    let pkg = "0";
    for (const line of fs.readFileSync("/proc/cpuinfo", "utf8").split("\n")) {
      const [key, value] = line.split(":").map((s) => s?.trim());
      if (key === "physical id") pkg = value;
      if (key === "core id") cores.add(`${pkg}:${value}`);
    }
    if (cores.size > 0) return cores.size;
  } catch {
    // not Linux: fall through
  }
  return os.availableParallelism?.() ?? os.cpus().length;
}

function readOptions() {
  let parsed;
  try {
    parsed = parseArgs({
      allowPositionals: true,
      options: {
        synth: { type: "string" },
        strata: { type: "string" },
        "llama-bench": { type: "string" },
        deps: { type: "string" },
        threads: { type: "string" },
        "prompt-tokens": { type: "string" },
        "gen-tokens": { type: "string" },
        reps: { type: "string" },
        "json-out": { type: "string" },
        help: { type: "boolean" },
      },
    });
  } catch (e) {
    fail(`${e.message} (--help lists the options)`);
  }
  const v = parsed.values;
  if (v.help) {
    console.log(HELP);
    process.exit(0);
  }
  const synth = (v.synth ?? "").split(",").filter(Boolean).map((spec) => {
    const [preset, type, layers, ...rest] = spec.split(":");
    if (!preset || !type || rest.length > 0) fail(`--synth: '${spec}' is not PRESET:TYPE or PRESET:TYPE:LAYERS`);
    return { preset, type, layers: layers === undefined ? null : positiveInt("synth layers", layers) };
  });
  if (parsed.positionals.length === 0 && synth.length === 0) {
    fail("give one or more GGUF models, or --synth PRESET:TYPE (--help lists the options)");
  }
  return {
    models: parsed.positionals.map((m) => path.resolve(m)),
    synth,
    strata: path.resolve(v.strata ?? path.join(REPO, "build", "strata")),
    llamaBench: v["llama-bench"] ? path.resolve(v["llama-bench"]) : null,
    deps: path.resolve(v.deps ?? path.join(REPO, "build", "node_deps_llama_cpp")),
    threads: v.threads ? positiveInt("threads", v.threads) : physicalCores(),
    promptTokens: positiveInt("prompt-tokens", v["prompt-tokens"] ?? "512"),
    genTokens: positiveInt("gen-tokens", v["gen-tokens"] ?? "64"),
    reps: positiveInt("reps", v.reps ?? "3"),
    jsonOut: v["json-out"] ? path.resolve(v["json-out"]) : null,
  };
}

function checkExecutable(file, what, howToGet) {
  try {
    fs.accessSync(file, fs.constants.X_OK);
  } catch {
    fail(`${what} ${fs.existsSync(file) ? "is not executable" : "does not exist"}: ${file} (${howToGet})`);
  }
}

// ---- figures ----

// The median as strata reports it: the middle value, or the mean of the middle two.
function median(values) {
  const v = [...values].sort((a, b) => a - b);
  const n = v.length;
  return n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

function measured(x) {
  return typeof x === "number" && Number.isFinite(x) && x > 0;
}

// A child process's failure in a few lines: the last non-empty lines of its stderr (of its
// stdout when stderr has none), or the first ones where the error comes first and a listing
// after it (strata synth's presets).
function tail(r, { lines = 8, first = false } = {}) {
  if (r.error) return r.error.message;
  const nonEmpty = (text) => (text ?? "").split("\n").filter((l) => l.trim());
  const text = nonEmpty(r.stderr).length > 0 ? nonEmpty(r.stderr) : nonEmpty(r.stdout);
  return (first ? text.slice(0, lines) : text.slice(-lines)).join("\n  ");
}

// How many cores other processes kept busy over one second while this one waited (from
// /proc/stat's counters; null where there is none): a busy machine's figures are low and noisy,
// the more so for engines whose threads spin at their barriers.
async function otherCpuUse() {
  const sample = () => {
    const [, ...fields] = fs.readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/);
    const v = fields.map(Number);
    const total = v.slice(0, 8).reduce((a, b) => a + b, 0); // user .. steal (guest is in user)
    return { total, idle: v[3] + v[4] }; // idle + iowait
  };
  try {
    const a = sample();
    await new Promise((done) => setTimeout(done, 1000));
    const b = sample();
    const total = b.total - a.total;
    return total > 0 ? (1 - (b.idle - a.idle) / total) * os.cpus().length : null;
  } catch {
    return null;
  }
}

// ---- strata ----

function runStrata(o, model, scratch) {
  const jsonFile = path.join(scratch, `strata-bench-${process.pid}-${Date.now()}.jsonl`);
  const argv = ["bench", model, "--prompt-tokens", String(o.promptTokens), "--gen-tokens", String(o.genTokens)];
  // --gpu-mem 0: a plan that uses no GPU, so that all three run on the CPU.
  argv.push("--reps", String(o.reps), "-t", String(o.threads), "--gpu-mem", "0", "--json", jsonFile);
  // Its progress lines (prefixed "strata:") go straight to stderr; its table is not needed.
  const r = spawnSync(o.strata, argv, { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"], maxBuffer: 64 << 20 });
  if (r.status !== 0) {
    return { error: `strata bench failed (exit status ${r.status ?? r.signal}; its messages are above)` };
  }
  let record;
  try {
    record = JSON.parse(fs.readFileSync(jsonFile, "utf8").trim().split("\n").at(-1));
  } catch (e) {
    return { error: `strata bench wrote no readable JSON line to ${jsonFile}: ${e.message}` };
  } finally {
    fs.rmSync(jsonFile, { force: true });
  }
  const run = record.runs?.[0];
  if (!run) return { error: "strata bench's JSON line has no runs" };
  if (record.threads !== o.threads) return { error: `strata ran with ${record.threads} threads, not ${o.threads}` };
  return {
    label: `strata (${run.mode})`,
    prompt: run.prompt_tokens_per_second.median,
    gen: run.gen_tokens_per_second.median,
    details: { mode: run.mode, threads: record.threads, prompt: run.prompt_tokens_per_second, gen: run.gen_tokens_per_second },
  };
}

// ---- llama-bench ----

// One llama-bench invocation; returns its one test's record (JSON output) or an error.
function llamaBenchTest(o, model, extra) {
  const argv = ["-m", model, ...extra, "-r", String(o.reps), "-t", String(o.threads)];
  // CPU only: no layers offloaded and no device, so that no backend takes over large products.
  argv.push("-ngl", "0", "-dev", "none", "-o", "json");
  const r = spawnSync(o.llamaBench, argv, { encoding: "utf8", maxBuffer: 64 << 20 });
  if (r.status !== 0) return { error: `llama-bench ${argv.join(" ")} failed (exit status ${r.status ?? r.signal}): ${tail(r)}` };
  let tests;
  try {
    tests = JSON.parse(r.stdout);
  } catch (e) {
    return { error: `llama-bench printed no JSON (${e.message}): ${tail(r)}` };
  }
  if (!Array.isArray(tests) || tests.length !== 1) return { error: `llama-bench reported ${tests?.length} tests, not 1` };
  const t = tests[0];
  if (t.n_threads !== o.threads) return { error: `llama-bench ran with ${t.n_threads} threads, not ${o.threads}` };
  if (!Array.isArray(t.samples_ts) || t.samples_ts.length === 0) return { error: "llama-bench's JSON has no samples_ts" };
  return { test: t };
}

function runLlamaBench(o, model) {
  const P = String(o.promptTokens);
  const G = String(o.genTokens);
  // Its prompt test, then its generation test at depth P: generation after a P-token prompt, as
  // the others measure it (its default tg test starts from an empty context).
  const pp = llamaBenchTest(o, model, ["-p", P, "-n", "0"]);
  if (pp.error) return pp;
  const tg = llamaBenchTest(o, model, ["-p", "0", "-n", G, "-d", P]);
  if (tg.error) return tg;
  const build = `${pp.test.build_commit}${pp.test.build_number ? ` b${pp.test.build_number}` : ""}`;
  const pick = ({ test: t }) => ({
    samples: t.samples_ts,
    n_prompt: t.n_prompt,
    n_gen: t.n_gen,
    n_depth: t.n_depth,
    flash_attn: t.flash_attn,
    n_batch: t.n_batch,
    n_ubatch: t.n_ubatch,
  });
  return {
    label: `llama.cpp ${build} (llama-bench)`,
    prompt: median(pp.test.samples_ts),
    gen: median(tg.test.samples_ts),
    details: { binary: o.llamaBench, build_commit: pp.test.build_commit, build_number: pp.test.build_number,
      cpu_info: pp.test.cpu_info, prompt: pick(pp), gen: pick(tg) },
  };
}

// ---- node-llama-cpp ----

// The vocabulary size: the token list's length, or the embedding matrix's rows.
function vocabularySize(model) {
  const tokens = model.fileInfo.metadata?.tokenizer?.ggml?.tokens;
  if (Array.isArray(tokens) && tokens.length > 0) return tokens.length;
  const embd = model.fileInfo.tensorInfo?.find((t) => t.name === "token_embd.weight");
  return Number(embd?.dimensions?.[1] ?? 0);
}

// Fixed pseudo-random ids in [0, nVocab) (a 32-bit LCG): the same prompt in every repetition.
function promptIds(n, nVocab) {
  const ids = [];
  let s = 12345;
  for (let i = 0; i < n; ++i) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    ids.push(s % nVocab);
  }
  return ids;
}

// Through `LlamaContextSequence.controlledEvaluate`, node-llama-cpp's lowest public call, which
// decodes exactly the ids it is given and computes logits (and samples) only where asked:
//   prompt:     one call with the P ids (one batch: batchSize = P), the last one asking for the
//               next token, so that the last position's logits are computed and sampled greedily
//   generation: G calls of one id each, each asking for the greedy next token, which the next
//               call evaluates
// Timed around those calls, so the figures include what node-llama-cpp adds around llama.cpp's
// decode per call: its scheduling, a sampler set up per call, two hand-overs to a worker thread.
// That is about 0.5-1 ms a call on a busy 2-core machine (the tiny test model: ~0.9 ms a token
// where llama-bench takes 0.12 ms), about 1% of a 1B model's token at 2 threads, less for
// larger ones; `sequence.evaluate`'s generator costs the same.
async function runNodeLlamaCpp(llama, o, modelPath) {
  const P = o.promptTokens;
  const G = o.genTokens;
  const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
  try {
    const nVocab = vocabularySize(model);
    if (!(nVocab > 0)) return { error: "node-llama-cpp found no vocabulary size in the file" };
    // One position more than used: a sequence keeps one free, and shifts the context otherwise.
    const ctx = await model.createContext({ contextSize: P + G + 1, batchSize: P, threads: o.threads });
    try {
      if (ctx.idealThreads !== o.threads) return { error: `node-llama-cpp took ${ctx.idealThreads} threads, not ${o.threads}` };
      const seq = ctx.getSequence();
      const prompt = promptIds(P, nVocab).map((id, i) => (i + 1 < P ? id : [id, { generateNext: { token: true } }]));
      const greedyNext = { generateNext: { token: true } };
      const rep = async (genTokens) => {
        await seq.clearHistory();
        const t0 = performance.now();
        const out = await seq.controlledEvaluate(prompt);
        const promptSeconds = (performance.now() - t0) / 1000;
        let next = out[P - 1]?.next?.token ?? 0;
        const g0 = performance.now();
        for (let i = 0; i < genTokens; ++i) {
          const step = await seq.controlledEvaluate([[next, greedyNext]]);
          next = step[0]?.next?.token ?? 0;
        }
        const genSeconds = (performance.now() - g0) / 1000;
        return { prompt: P / promptSeconds, gen: genTokens / genSeconds };
      };
      await rep(Math.min(G, 2)); // warm-up, as strata's: the prompt and two tokens
      const reps = [];
      for (let r = 0; r < o.reps; ++r) reps.push(await rep(G));
      const prompt_samples = reps.map((r) => r.prompt);
      const gen_samples = reps.map((r) => r.gen);
      return {
        label: `llama.cpp (node-llama-cpp ${LLAMA_VERSION})`,
        prompt: median(prompt_samples),
        gen: median(gen_samples),
        details: { version: LLAMA_VERSION, llama_cpp_release: llama.llamaCppRelease?.release, threads: ctx.idealThreads,
          flash_attention: ctx.flashAttention, context_size: ctx.contextSize, batch_size: ctx.batchSize,
          prompt_samples, gen_samples },
      };
    } finally {
      await ctx.dispose();
    }
  } catch (e) {
    return { error: `node-llama-cpp could not run the model: ${e.message}` };
  } finally {
    await model.dispose();
  }
}

// ---- the table ----

function formatSize(bytes) {
  return bytes >= 2 ** 30 ? `${(bytes / 2 ** 30).toFixed(2)} GiB` : `${(bytes / 2 ** 20).toFixed(1)} MiB`;
}

// Rows of cells under a header; columns after the third are right-aligned.
function renderTable(header, rows) {
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => r[c].length)));
  const line = (cells) => cells.map((s, c) => (c < 3 ? s.padEnd(widths[c]) : s.padStart(widths[c]))).join("  ").trimEnd();
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
}

function ratio(strata, peers) {
  const best = Math.max(...peers.filter(measured));
  return measured(strata) && measured(best) ? strata / best : null;
}

// strata's prompt and generation speed over the faster peer's (null where either is missing).
function strataVsFasterPeer(engines) {
  const [strata, ...peers] = engines;
  return {
    prompt: ratio(strata.prompt, peers.map((p) => p.prompt)),
    gen: ratio(strata.gen, peers.map((p) => p.gen)),
  };
}

function tableRows(results) {
  const rows = [];
  for (const m of results) {
    const r = m.strataVsFasterPeer;
    m.engines.forEach((e, i) => {
      const cell = (x, digits) => (measured(x) ? x.toFixed(digits) : e.status);
      const x = (v) => (i === 0 && v !== null ? `${v.toFixed(2)}x` : "");
      rows.push([i === 0 ? m.name : "", i === 0 ? formatSize(m.fileBytes) : "", e.label,
        cell(e.prompt, 1), cell(e.gen, 2), x(r.prompt), x(r.gen)]);
    });
  }
  return rows;
}

// ---- main ----

// Writes the model `s` (PRESET:TYPE[:LAYERS]) into `dir`; returns its path.
function synthModel(o, s, dir) {
  const name = `${s.preset}${s.layers ? `-${s.layers}l` : ""}-${s.type}.gguf`;
  const file = path.join(dir, name);
  const argv = ["synth", "--preset", s.preset, "--type", s.type, "--seed", "1", "-o", file];
  if (s.layers) argv.push("--layers", String(s.layers));
  progress(`writing ${name} with strata synth`);
  const r = spawnSync(o.strata, argv, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`strata synth ${argv.slice(1).join(" ")} failed: ${tail(r, { lines: 1, first: true })}`);
  return file;
}

async function main() {
  const o = readOptions();
  reexecUnderNewerNode(TOOL, o.deps, fail);
  checkExecutable(o.strata, "strata", "build it with `ninja -C build strata`, or give --strata PATH");
  if (o.llamaBench) checkExecutable(o.llamaBench, "--llama-bench", "give the path of a llama-bench binary you built");
  for (const m of o.models) {
    if (!fs.existsSync(m)) fail(`${m}: no such model file`);
  }
  // Installed (or found) before anything is measured, so that a failing npm stops the run early.
  progress(`loading node-llama-cpp ${LLAMA_VERSION} from ${o.deps}`);
  const llama = await loadLlamaCpp(o.deps, fail);
  // 0: the context's thread count is the number used, not a hint capped at the cores.
  llama.maxThreads = 0;

  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "strata-peers-"));
  // Interrupted: the synthetic models go too (the child running then has had the signal as well).
  process.on("SIGINT", () => {
    fs.rmSync(scratch, { recursive: true, force: true });
    process.exit(130);
  });
  const results = [];
  let failures = 0;
  try {
    // A synthetic model is written just before its turn and removed after it: a few large ones
    // need not fit on the disk together.
    for (const source of [...o.models.map((file) => ({ file })), ...o.synth]) {
      const model = source.file ?? synthModel(o, source, scratch);
      const name = path.basename(model);
      const fileBytes = fs.statSync(model).size;
      const engines = [];
      const what = `${o.promptTokens}-token prompt, ${o.genTokens} generated, ${o.reps} reps, ${o.threads} threads`;
      // Runs one engine: how busy the machine was just before, then its figures or its error.
      const measure = async (label, run) => {
        const busyCores = await otherCpuUse();
        progress(`${name}: ${label} (${what})`);
        if (busyCores !== null && busyCores > 0.25) {
          progress(`warning: other work kept ${busyCores.toFixed(2)} cores busy just before ${label}: its figures will be low and noisy`);
        }
        const r = await run();
        const entry = { label, ...r, busy_cores_before: busyCores };
        if (!r.error && !(measured(r.prompt) && measured(r.gen))) {
          entry.error = `measured no speed (prompt ${r.prompt}, generation ${r.gen} tok/s)`;
        }
        if (entry.error) {
          ++failures;
          console.error(`${TOOL}: ${name}: ${label}: ${entry.error}`);
          entry.status = "failed";
        } else {
          progress(`${name}: ${r.label}: prompt ${r.prompt.toFixed(1)} tok/s, generation ${r.gen.toFixed(2)} tok/s`);
          entry.status = "ok";
        }
        engines.push(entry);
      };
      await measure("strata", () => runStrata(o, model, scratch));
      if (o.llamaBench) {
        await measure("llama.cpp (llama-bench)", () => runLlamaBench(o, model));
      } else {
        engines.push({ label: "llama.cpp (llama-bench)", status: "not given" });
      }
      await measure(`llama.cpp (node-llama-cpp ${LLAMA_VERSION})`, () => runNodeLlamaCpp(llama, o, model));
      results.push({ name, path: source.file ? model : null, fileBytes, engines, strataVsFasterPeer: strataVsFasterPeer(engines) });
      if (!source.file) fs.rmSync(model, { force: true });
    }
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
    await llama.dispose();
  }

  const header = ["model", "size", "engine", "prompt tok/s", "gen tok/s", "prompt vs peer", "gen vs peer"];
  const rows = tableRows(results);
  console.log(`${o.threads} threads, prompt ${o.promptTokens} tokens, then ${o.genTokens} generated; ` +
    `median of ${o.reps} after a warm-up; "vs peer": strata over the faster llama.cpp`);
  console.log(renderTable(header, rows));
  if (o.jsonOut) {
    const json = {
      date: new Date().toISOString(),
      cpu: os.cpus()[0]?.model,
      threads: o.threads,
      prompt_tokens: o.promptTokens,
      gen_tokens: o.genTokens,
      reps: o.reps,
      strata: o.strata,
      table: { header, rows },
      models: results.map((m) => ({
        model: m.name,
        path: m.path,
        file_bytes: m.fileBytes,
        strata_vs_faster_peer: m.strataVsFasterPeer,
        engines: m.engines.map((e) => ({
          engine: e.label,
          status: e.status,
          busy_cores_before: e.busy_cores_before ?? null,
          prompt_tokens_per_second: e.prompt ?? null,
          gen_tokens_per_second: e.gen ?? null,
          ...(e.error ? { error: e.error } : {}),
          ...(e.details ? { details: e.details } : {}),
        })),
      })),
    };
    fs.writeFileSync(o.jsonOut, `${JSON.stringify(json, null, 2)}\n`);
    progress(`table written to ${o.jsonOut}`);
  }
  process.exit(failures > 0 ? 1 : 0);
}

// Errors thrown after the scratch directory exists (it is removed on the way out) end here.
await main().catch((e) => fail(e.message));
