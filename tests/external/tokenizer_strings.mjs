// Strings for the tokenizer comparison: hand-picked cases that exercise each part of the
// pre-tokenizer expressions (contractions, digit grouping, whitespace runs before words and at
// the end, newlines, case changes, punctuation runs, marks, CJK and kana ranges, emoji with
// joiners, special tokens written in text), then seeded random mixes of fragments of them.

const BASE = [
  "", " ", "  ", "\n", " \n", "\n\n\n", "\t", "\t\t x", "a", "Hello world", " Hello world",
  "Hello  world   ", "hello\nworld", "line one\r\nline two\r\n", "trailing spaces   ",
  "   leading spaces", "I'm sure you'll see we've done it, they'd say; it's John's.",
  "I'M SURE YOU'LL SEE WE'VE DONE IT", "don't DON'T Don'T", "'s 'S 't 're 'VE 'm 'll 'D",
  "1", "12", "123", "1234", "12345", "1234567890", "3.14159", "1,000,000", "v1.2.3-rc4",
  "0x1F600", "2026-12-07T14:30:00Z", "$100.00 and 50% off", "  42  ",
  "CamelCaseWordsAndHTTPRequest", "XMLHttpRequest getHTTPResponseCode", "ALLCAPS lowercase MiXeD",
  "snake_case_name = other_name", "kebab-case-name", "path/to/file.txt", "a/b/c//d",
  "https://example.com/a?b=c&d=e#frag", "user@example.com",
  "def f(x):\n    return x ** 2  # square\n", "int main() {\n\treturn 0;\n}\n",
  "for (let i = 0; i < n; i++) { sum += a[i]; }", "if x != y and not z:\n        pass",
  "<div class=\"x\">Hi &amp; bye</div>", "SELECT * FROM t WHERE id = 7;",
  "```python\nprint('hi')\n```", "{\"key\": [1, 2.5, null, true], \"nested\": {\"a\": \"b\"}}",
  "!!!???...", "......!!!!!!??????", "------=======", "'''''''```````\"\"\"\"", "(a) [b] {c} <d>",
  "¡Hola! ¿Qué tal?", "Ça va très bien, merci.", "Grüße aus München – straße", "naïve café résumé",
  "aÉté naïveÉCOLE ÉcoleNormale ÀBCdéf",
  "Привет, мир! Как дела?", "Γειά σου Κόσμε", "שלום עולם", "مرحبا بالعالم ١٢٣",
  "नमस्ते दुनिया", "कृपया ध्यान दें।", "สวัสดีชาวโลก", "ሰላም ልዑል", "Բարեւ աշխարհ",
  "你好，世界！", "我想在apple工作1314151天～", "日本語のテキストとカタカナ、ひらがな。",
  "東京タワーは333メートルです", "한국어 텍스트입니다. 안녕하세요!", "中文English混合123abc",
  "ｆｕｌｌｗｉｄｔｈ　ＡＢＣ　１２３", "ﬁne ﬂow", "Ⅻ ⅻ ① ½ ²³", "µ ÷ × ± ∞ ≠ ≤",
  "🚀 (normal) 😶‍🌫️ (multiple emojis concatenated) ✅ 🦙🦙", "👨‍👩‍👧‍👦 family 🏳️‍🌈 flag",
  "👍🏽 thumbs 🇯🇵 🇺🇸", "emoji🙂inside🙃words", "☕️ coffee ♥ ★",
  "កាន់តែពិសេសអាច😁", "a\u200bb\u200cc\u200dd", "zero\u00a0width\u2009spaces\u3000here",
  "\u2028line\u2029para\u0085next", "tab\tseparated\tvalues\n1\t2\t3",
  "   \n\n   \t\t\n  x", "x\n \n  \n   \n", "end with newline\n", "\n\nstart with newlines",
  "<|endoftext|>", "text<|endoftext|>more", "<|im_start|>user\nhi<|im_end|>",
  "<think>\nreasoning\n</think>\n\nanswer", "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
  "<|start|>assistant<|channel|>final<|message|>hi<|return|>",
  "<｜begin▁of▁sentence｜>Hello<｜end▁of▁sentence｜>", "<|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>",
  "The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX!",
  "Mr. O'Neil's 'quoted' “curly” ‘single’ «guillemets» — dash … ellipsis",
  "x=1;y=2;z=x+y", "a+b-c*d/e%f^g", "~`!@#$%^&*()_+-={}[]|\\:;\"'<>,.?/",
];

// A small deterministic generator, so that failures reproduce.
function mulberry32(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function testStrings(count = 320) {
  const out = [...BASE];
  const random = mulberry32(20261207);
  const pick = (list) => list[Math.floor(random() * list.length)];
  const separators = ["", " ", "  ", "\n", "\t", " \n ", "\r\n", "   "];
  while (out.length < count) {
    const parts = [];
    const n = 2 + Math.floor(random() * 4);
    for (let i = 0; i < n; i++) {
      const s = [...pick(BASE)];  // code points, so no surrogate pair is cut
      const from = Math.floor(random() * s.length);
      const to = from + 1 + Math.floor(random() * 24);
      parts.push(s.slice(from, to).join(""));
      parts.push(pick(separators));
    }
    out.push(parts.join(""));
  }
  return out;
}
