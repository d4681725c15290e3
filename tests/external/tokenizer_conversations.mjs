// Conversations for the chat-template comparison: plain turns, system and developer messages,
// tools with nested parameter schemas, assistant tool calls and tool results, earlier reasoning,
// thinking switches (enable_thinking, thinking) and reasoning effort, call ids and string
// arguments, and a few that the templates reject. Each is rendered
// with and without the generation prompt.

const WEATHER = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Get the weather for a city",
    parameters: {
      type: "object",
      properties: {
        city: { type: "string", description: "City name" },
        days: { type: "integer", description: "How many days", default: 1 },
        units: { type: "string", enum: ["metric", "imperial"], description: "Units" },
      },
      required: ["city"],
    },
  },
};
const SEARCH = {
  type: "function",
  function: {
    name: "search",
    description: "Search documents",
    parameters: {
      type: "object",
      properties: {
        query: { type: "string", description: "Query text" },
        filters: { type: "array", items: { type: "string" }, description: "Filters" },
        limit: { type: "number", description: "Maximum results" },
        exact: { type: "boolean", description: "Exact match" },
      },
      required: ["query"],
    },
  },
};

const user = (content) => ({ role: "user", content });
const assistant = (content, extra = {}) => ({ role: "assistant", content, ...extra });
const call = (name, args) => ({ type: "function", function: { name, arguments: args } });

const BASE = [
  { name: "one user turn", messages: [user("Hello! 🦙")] },
  { name: "system and user", messages: [{ role: "system", content: "Be brief." }, user("Why is the sky blue?")] },
  { name: "developer message", messages: [{ role: "developer", content: "Answer in French." }, user("Hi")] },
  {
    name: "multi-turn",
    messages: [user("What is 2+2?"), assistant("4."), user("And 3+3?"), assistant("6."), user("Thanks 日本")],
  },
  {
    name: "earlier reasoning",
    messages: [user("Think first."), assistant("Done.", { thinking: "Let me see.", reasoning_content: "Let me see." }), user("Again")],
  },
  { name: "whitespace and newlines", messages: [user("  line one\n\nline two  \n"), assistant(" ok \n"), user("\tx")] },
  { name: "tools offered", messages: [user("Weather in Paris?")], tools: [WEATHER, SEARCH] },
  {
    name: "tool call and result",
    messages: [
      user("Weather in Paris?"),
      assistant("", { tool_calls: [call("get_weather", { city: "Paris", days: 2 })] }),
      { role: "tool", content: "{\"temp\": 21, \"sky\": \"clear\"}" },
    ],
    tools: [WEATHER],
  },
  {
    name: "tool call, result and answer",
    messages: [
      { role: "system", content: "You are helpful." },
      user("Find docs about GGUF"),
      assistant("", { tool_calls: [call("search", { query: "GGUF", filters: ["spec"], limit: 3, exact: false })] }),
      { role: "tool", content: "3 results" },
      assistant("I found 3 documents."),
      user("Thanks"),
    ],
    tools: [SEARCH],
  },
  {
    name: "two tool calls",
    messages: [
      user("Weather in Paris and Rome?"),
      assistant("", { tool_calls: [call("get_weather", { city: "Paris" }), call("get_weather", { city: "Rome" })] }),
      { role: "tool", content: "sunny" },
      { role: "tool", content: "rainy" },
    ],
    tools: [WEATHER],
  },
  { name: "thinking off", messages: [user("Quick answer")], enable_thinking: false },
  { name: "thinking on", messages: [user("Careful answer")], enable_thinking: true },
  { name: "reasoning effort high", messages: [user("Prove it")], reasoning_effort: "high" },
  { name: "reasoning effort low", messages: [user("Quick")], reasoning_effort: "low", tools: [SEARCH] },
  { name: "final assistant turn", messages: [user("Hi"), assistant("Hello there!")] },
  // DeepSeek V3.1 and Kimi K2.5 switch thinking with `thinking`.
  { name: "thinking variable on", messages: [user("Careful answer")], thinking: true },
  { name: "thinking variable off", messages: [user("Quick answer")], thinking: false },
  {
    // As OpenAI clients send them: arguments as a JSON string, call ids, tool_call_id on results
    // (Kimi K2 writes the id into the prompt; DeepSeek's templates need string arguments).
    name: "string arguments and call ids",
    messages: [
      user("Weather in Paris?"),
      assistant(null, {
        tool_calls: [{ id: "functions.get_weather:0", type: "function",
                       function: { name: "get_weather", arguments: "{\"city\": \"Paris\"}" } }],
      }),
      { role: "tool", tool_call_id: "functions.get_weather:0", content: "sunny, 21°C" },
      assistant("Sunny in Paris."),
      user("Merci"),
    ],
    tools: [WEATHER],
  },
  {
    name: "reasoning then a call",
    messages: [
      user("Weather in Rome?"),
      assistant("", { reasoning_content: "Need the tool.", tool_calls: [call("get_weather", { city: "Rome", units: "metric" })] }),
      { role: "tool", content: "rain" },
    ],
    tools: [WEATHER],
    enable_thinking: true,
  },
  {
    name: "earlier reasoning in think tags",
    messages: [user("2+2?"), assistant("<think>\nsimple sum\n</think>\n\n4"), user("3+3?")],
    thinking: true,
  },
  { name: "tool result without a call", messages: [user("x"), { role: "tool", content: "orphan" }] },
];

export function conversations() {
  const out = [];
  for (const c of BASE) {
    for (const add_generation_prompt of [true, false]) {
      const context = { messages: c.messages, add_generation_prompt };
      for (const key of ["tools", "enable_thinking", "thinking", "reasoning_effort"]) {
        if (c[key] !== undefined) context[key] = c[key];
      }
      out.push({ name: `${c.name}${add_generation_prompt ? ", generation prompt" : ""}`, context });
    }
  }
  return out;
}
