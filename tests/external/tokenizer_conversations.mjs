// Conversations for the chat-template comparison: plain turns, system and developer messages,
// tools with nested parameter schemas, assistant tool calls and tool results, earlier reasoning,
// thinking switches and reasoning effort, and a few that the templates reject. Each is rendered
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
  { name: "tool result without a call", messages: [user("x"), { role: "tool", content: "orphan" }] },
];

export function conversations() {
  const out = [];
  for (const c of BASE) {
    for (const add_generation_prompt of [true, false]) {
      const context = { messages: c.messages, add_generation_prompt };
      for (const key of ["tools", "enable_thinking", "reasoning_effort"]) {
        if (c[key] !== undefined) context[key] = c[key];
      }
      out.push({ name: `${c.name}${add_generation_prompt ? ", generation prompt" : ""}`, context });
    }
  }
  return out;
}
