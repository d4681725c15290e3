// Shared by the tests that check strata against other projects' code: command-line arguments,
// and installing an npm package on first use into a cache directory under the build tree
// (scripts/setup installs node and npm).
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

// Installs `spec` (name@version, or a list of them installed together) into `deps` unless
// `entry` (relative to deps/node_modules) is there already; returns the absolute path of
// `entry`. `npmFlags`: more flags for `npm install`. `fail` reports and exits.
export function ensurePackage(deps, spec, entry, fail, npmFlags = []) {
  const file = path.join(deps, "node_modules", entry);
  if (fs.existsSync(file)) return file;
  fs.mkdirSync(deps, { recursive: true });
  const specs = Array.isArray(spec) ? spec : [spec];
  console.error(`installing ${specs.join(" ")} into ${deps}`);
  try {
    // npm's output is progress: on stderr, so that a tool's own output on stdout stays clean.
    execFileSync("npm", ["install", "--prefix", deps, "--no-audit", "--no-fund", ...npmFlags, ...specs], {
      stdio: ["ignore", 2, "inherit"],
    });
  } catch (e) {
    if (e.code === "ENOENT") fail("npm is not installed (scripts/setup installs nodejs and npm)");
    fail(`npm install ${spec} failed (is the npm registry reachable?): ${e.message}`);
  }
  if (!fs.existsSync(file)) fail(`${spec} installed, but ${file} is missing`);
  return file;
}

// `--key value` pairs into an object; every name in `required` must be given. Returns the
// arguments and a `fail(message)` that prints "<tool>: message" and exits with status 1.
export function commandLine(tool, required) {
  const fail = (message) => {
    console.error(`${tool}: ${message}`);
    process.exit(1);
  };
  const argv = process.argv.slice(2);
  const args = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith("--") || i + 1 >= argv.length) fail(`bad argument '${argv[i]}'`);
    args[argv[i].slice(2)] = argv[i + 1];
  }
  for (const k of required) if (!args[k]) fail(`--${k} is required`);
  return { args, fail };
}
