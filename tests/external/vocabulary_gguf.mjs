// Writes a vocabulary-only GGUF (metadata, no tensors) from a Hugging Face tokenizer.json and
// tokenizer_config.json, with the token list, types and merges that llama.cpp's converter
// writes for a byte-level BPE model:
//   - tokens in id order: the model's vocabulary, then the added tokens; ids that neither has
//     become "[PAD<id>]" (type unused);
//   - types: added tokens that are special, or look like control tokens (<|...|>), are control
//     (3); other added tokens are user-defined (4); the rest normal (1);
//   - merges as "left right".
// Format: GGUF version 3, little-endian (see the GGUF specification).
import fs from "node:fs";

const TYPE = { UINT32: 4, BOOL: 7, STRING: 8, ARRAY: 9, INT32: 5 };
const TOKEN = { NORMAL: 1, CONTROL: 3, USER_DEFINED: 4, UNUSED: 5 };

class Writer {
  constructor() {
    this.chunks = [];
  }
  u32(v) {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v);
    this.chunks.push(b);
  }
  i32(v) {
    const b = Buffer.alloc(4);
    b.writeInt32LE(v);
    this.chunks.push(b);
  }
  u64(v) {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(v));
    this.chunks.push(b);
  }
  string(s) {
    const bytes = Buffer.from(s, "utf8");
    this.u64(bytes.length);
    this.chunks.push(bytes);
  }
  bytes() {
    return Buffer.concat(this.chunks);
  }
}

function looksLikeControl(text) {
  return (text.startsWith("<|") && text.endsWith("|>")) ||
         (text.startsWith("<\uFF5C") && text.endsWith("\uFF5C>"));
}

function tokenText(t) {
  return typeof t === "string" ? t : t?.content;
}

// The GGUF entries for one tokenizer: [key, type, value] with arrays as [ARRAY, elementType, items].
export function vocabularyEntries({ tokenizer, config, pre, template }) {
  const byId = new Map();
  for (const [text, id] of Object.entries(tokenizer.model.vocab)) byId.set(id, [text, TOKEN.NORMAL]);
  for (const a of tokenizer.added_tokens) {
    byId.set(a.id, [a.content, a.special || looksLikeControl(a.content) ? TOKEN.CONTROL : TOKEN.USER_DEFINED]);
  }
  let size = 0;
  for (const id of byId.keys()) size = Math.max(size, id + 1);
  const tokens = [], types = [];
  for (let id = 0; id < size; id++) {
    const [text, type] = byId.get(id) ?? [`[PAD${id}]`, TOKEN.UNUSED];
    tokens.push(text);
    types.push(type);
  }
  const merges = tokenizer.model.merges.map((m) => (Array.isArray(m) ? m.join(" ") : m));
  const idOf = (t) => {
    const text = tokenText(t);
    for (const a of tokenizer.added_tokens) if (a.content === text) return a.id;
    return tokenizer.model.vocab[text];
  };
  const entries = [
    ["general.architecture", TYPE.STRING, "llama"],
    ["tokenizer.ggml.model", TYPE.STRING, "gpt2"],
    ["tokenizer.ggml.pre", TYPE.STRING, pre],
    ["tokenizer.ggml.tokens", TYPE.ARRAY, [TYPE.STRING, tokens]],
    ["tokenizer.ggml.token_type", TYPE.ARRAY, [TYPE.INT32, types]],
    ["tokenizer.ggml.merges", TYPE.ARRAY, [TYPE.STRING, merges]],
    ["tokenizer.ggml.add_bos_token", TYPE.BOOL, config.add_bos_token === true],
  ];
  for (const [key, t] of [["bos", config.bos_token], ["eos", config.eos_token]]) {
    const id = t ? idOf(t) : undefined;
    if (id !== undefined) entries.push([`tokenizer.ggml.${key}_token_id`, TYPE.UINT32, id]);
  }
  if (template) entries.push(["tokenizer.chat_template", TYPE.STRING, template]);
  return entries;
}

function writeValue(w, type, value) {
  switch (type) {
    case TYPE.STRING: w.string(value); break;
    case TYPE.UINT32: w.u32(value); break;
    case TYPE.INT32: w.i32(value); break;
    case TYPE.BOOL: w.chunks.push(Buffer.from([value ? 1 : 0])); break;
    case TYPE.ARRAY: {
      const [elementType, items] = value;
      w.u32(elementType);
      w.u64(items.length);
      for (const item of items) writeValue(w, elementType, item);
      break;
    }
    default: throw new Error(`unsupported GGUF type ${type}`);
  }
}

export function writeVocabularyGguf(file, family) {
  const entries = vocabularyEntries(family);
  const w = new Writer();
  w.chunks.push(Buffer.from("GGUF", "ascii"));
  w.u32(3);  // version
  w.u64(0);  // tensors
  w.u64(entries.length);
  for (const [key, type, value] of entries) {
    w.string(key);
    w.u32(type);
    writeValue(w, type, value);
  }
  fs.writeFileSync(file, w.bytes());
}
