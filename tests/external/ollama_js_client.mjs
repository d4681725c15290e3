// The `ollama` npm client (ollama-js), unchanged, against `strata serve` on loopback: every call
// a real application makes (list, version, show, ps, generate and chat streamed and not, embed,
// tools, errors), plus an OpenAI-style SSE client for /v1 written with fetch.
//
// usage: node ollama_js_client.mjs --strata BIN --deps DIR --templates DIR
//   --deps: where the npm package is installed when missing (a cache under the build tree)
//   --templates: the test data's chat templates (Qwen2.5's, with tools, for the tools model)
import { execFileSync, spawn } from "node:child_process";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

import { commandLine, ensurePackage } from "./support.mjs";

const PACKAGE = "ollama@0.6.4";

const { args, fail } = commandLine("ollama_js_client", ["strata", "deps", "templates"]);

// Starts the server on a free port; resolves with its base URL once it listens.
function startServer(strata, models) {
  const child = spawn(strata, ["serve", ...models, "--port", "0", "--threads", "2", "--context", "1024"], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  return new Promise((resolve, reject) => {
    let err = "";
    // Generous: on a machine without a cached hardware profile, serve measures it (under a
    // minute) to plan the models before it listens.
    const timer = setTimeout(() => reject(new Error(`strata serve did not start:\n${err}`)), 120000);
    child.stderr.on("data", (d) => {
      err += d;
      const m = err.match(/listening on (http:\/\/[^\s]+)/);
      if (m) {
        clearTimeout(timer);
        resolve({ child, url: m[1] });
      }
    });
    child.on("exit", (code) => reject(new Error(`strata serve exited (${code}):\n${err}`)));
  });
}

async function main() {
  const entry = ensurePackage(args.deps, PACKAGE, path.join("ollama", "dist", "index.mjs"), fail);
  const { Ollama } = await import(pathToFileURL(entry).href);

  const qwenTemplate = path.join(args.templates, "Qwen-Qwen2.5-7B-Instruct.jinja");
  if (!fs.existsSync(qwenTemplate)) {
    const missing = `${qwenTemplate} is missing (the test data is not beside the repository)`;
    // In CI the data must be there: a check that skips itself there would pass unseen.
    if (process.env.CI === "true") fail(`the test data is missing: ${missing}; CI=true requires it`);
    console.log(`ollama_js_client: skipped: ${missing}`);
    process.exit(77);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "strata-ollama-js-"));
  const tiny = path.join(dir, "tiny.gguf");
  const tools = path.join(dir, "tools.gguf");
  const synth = ["synth", "--preset", "tiny", "--type", "Q8_0", "--seed", "7", "--threads", "2"];
  execFileSync(args.strata, [...synth, "-o", tiny]);
  execFileSync(args.strata, [...synth, "-o", tools, "--chat-template", qwenTemplate]);
  const { child, url } = await startServer(args.strata, [tiny, tools]);
  const results = [];
  const check = async (name, fn) => {
    const t0 = Date.now();
    await fn();
    results.push(`${name} (${Date.now() - t0} ms)`);
  };
  try {
    const ollama = new Ollama({ host: url });
    const greedy = { temperature: 0, num_predict: 12 };

    await check("version", async () => assert.match((await ollama.version()).version, /^\d+\.\d+\.\d+/));
    await check("list", async () => {
      const { models } = await ollama.list();
      assert.deepEqual(models.map((m) => m.name), ["tiny:latest", "tools:latest"]);
      assert.equal(models[0].details.format, "gguf");
    });
    await check("show", async () => {
      const s = await ollama.show({ model: "tiny" });
      assert.equal(s.model_info["general.architecture"], "llama");
      assert.ok(s.capabilities.includes("completion"));
      assert.ok((await ollama.show({ model: "tools" })).capabilities.includes("tools"));
    });
    await check("generate", async () => {
      const r = await ollama.generate({ model: "tiny", prompt: "Once upon a time", options: greedy });
      assert.equal(r.done, true);
      assert.ok(r.response.length > 0);
      assert.equal(r.eval_count, 12);
      let streamed = "";
      for await (const part of await ollama.generate({ model: "tiny", prompt: "Once upon a time",
                                                       options: greedy, stream: true })) {
        streamed += part.response;
      }
      assert.equal(streamed, r.response);
    });
    await check("chat", async () => {
      const messages = [{ role: "user", content: "Hello" }];
      const r = await ollama.chat({ model: "tiny", messages, options: greedy });
      assert.equal(r.message.role, "assistant");
      let streamed = "";
      let last;
      for await (const part of await ollama.chat({ model: "tiny", messages, options: greedy, stream: true })) {
        streamed += part.message.content;
        last = part;
      }
      assert.equal(streamed, r.message.content);
      assert.equal(last.done, true);
      assert.ok(Number.isInteger(last.eval_duration));
    });
    await check("format", async () => {
      const schema = { type: "object", properties: { age: { type: "integer" } }, required: ["age"] };
      const r = await ollama.chat({ model: "tiny", messages: [{ role: "user", content: "age?" }],
                                    format: schema, options: { seed: 4, num_predict: 40 } });
      assert.equal(typeof JSON.parse(r.message.content).age, "number");
    });
    await check("tools", async () => {
      const weather = { type: "function", function: { name: "get_weather", description: "Weather",
        parameters: { type: "object", properties: { city: { type: "string", maxLength: 12 } }, required: ["city"] } } };
      const messages = [{ role: "user", content: "What's the weather in Paris?" }];
      const r = await ollama.chat({ model: "tools", messages, tools: [weather], tool_choice: "required",
                                    options: { seed: 3, num_predict: 80 } });
      assert.equal(r.message.tool_calls[0].function.name, "get_weather");
      assert.equal(typeof r.message.tool_calls[0].function.arguments.city, "string");
      const follow = await ollama.chat({ model: "tools", tools: [weather], options: { num_predict: 8 },
        messages: [...messages, r.message, { role: "tool", content: "18C", tool_name: "get_weather" }] });
      assert.equal(typeof follow.message.content, "string");
    });
    await check("embed", async () => {
      const r = await ollama.embed({ model: "tiny", input: ["a river", "hello"] });
      assert.equal(r.embeddings.length, 2);
      const norm = Math.hypot(...r.embeddings[0]);
      assert.ok(Math.abs(norm - 1) < 1e-3, `norm ${norm}`);
      assert.equal((await ollama.embeddings({ model: "tiny", prompt: "hello" })).embedding.length, 256);
    });
    await check("ps", async () => {
      const { models } = await ollama.ps();
      assert.ok(models.some((m) => m.name === "tiny:latest"));
    });
    await check("errors", async () => {
      await assert.rejects(ollama.chat({ model: "nope", messages: [{ role: "user", content: "x" }] }),
                           (e) => e.status_code === 404 && /not found/.test(e.error));
      await assert.rejects(ollama.delete({ model: "nope" }), (e) => e.status_code === 404);
      await assert.rejects(ollama.chat({ model: "tiny", think: true, messages: [{ role: "user", content: "x" }] }),
                           (e) => e.status_code === 400);
    });
    await check("openai-sse", async () => {
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Authorization: "Bearer sk-anything" },
        body: JSON.stringify({ model: "tiny", stream: true, max_tokens: 6, temperature: 0,
                               stream_options: { include_usage: true },
                               messages: [{ role: "user", content: "Hello" }] }),
      });
      assert.match(res.headers.get("content-type"), /text\/event-stream/);
      const events = (await res.text()).split("\n\n").filter((e) => e.length > 0);
      assert.equal(events.at(-1), "data: [DONE]");
      const chunks = events.slice(0, -1).map((e) => JSON.parse(e.replace(/^data: /, "")));
      assert.equal(chunks[0].choices[0].delta.role, "assistant");
      assert.equal(chunks.at(-1).usage.completion_tokens, 6);
      assert.equal(chunks.at(-2).choices[0].finish_reason, "length");
    });
  } finally {
    child.kill("SIGTERM");
    fs.rmSync(dir, { recursive: true, force: true });
  }
  for (const r of results) console.log(`ok ${r}`);
  console.log(`ollama_js_client: ${results.length} checks passed with ${PACKAGE}`);
}

main().catch((e) => fail(e.stack || String(e)));
