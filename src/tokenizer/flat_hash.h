// Open-addressing hash tables for the tokenizer's hot lookups (token text -> id, merge pair ->
// merge). Merging asks one of these for every adjacent pair of symbols, so a lookup must be a
// hash and a probe or two in one flat array, not a walk through separately allocated nodes. Both
// are sized once for a known number of entries (load factor at most 1/2) and never grow.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <string_view>
#include <vector>

namespace strata {

// 64-bit FNV-1a with a final avalanche; token texts are short, so a per-byte hash is cheap.
inline uint64_t hash_text(std::string_view s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
    h ^= h >> 32;
    h *= 0xd6e8feb86659fd93ull;
    return h ^ (h >> 32);
}

inline size_t table_capacity(size_t entries) {
    return std::bit_ceil(std::max<size_t>(entries * 2, 16));
}

// Text -> id. The table stores ids only; `text_of(id)` reads an id's text from its owner.
class TextIdTable {
  public:
    void reserve(size_t entries) {
        slots_.assign(table_capacity(entries), 0);
        mask_ = slots_.size() - 1;
    }

    // Returns true when `text` was present (its id is replaced).
    template <typename TextOf>
    bool insert_or_assign(std::string_view text, int32_t id, TextOf text_of) {
        const uint64_t h = hash_text(text);
        for (size_t i = h & mask_;; i = (i + 1) & mask_) {
            uint64_t& slot = slots_[i];
            if (slot == 0) {
                slot = pack(h, id);
                return false;
            }
            if (tag(slot) == tag(h) && text_of(id_of(slot)) == text) {
                slot = pack(h, id);
                return true;
            }
        }
    }

    // The id of `text`, or -1.
    template <typename TextOf>
    int32_t find(std::string_view text, TextOf text_of) const {
        if (slots_.empty()) return -1;
        const uint64_t h = hash_text(text);
        for (size_t i = h & mask_;; i = (i + 1) & mask_) {
            const uint64_t slot = slots_[i];
            if (slot == 0) return -1;
            if (tag(slot) == tag(h) && text_of(id_of(slot)) == text) return id_of(slot);
        }
    }

  private:
    // A slot holds the hash's high 32 bits (to skip most text comparisons) and id + 1 (0 means
    // empty).
    static uint64_t tag(uint64_t v) { return v >> 32; }
    static int32_t id_of(uint64_t slot) { return static_cast<int32_t>((slot & 0xFFFFFFFFu) - 1); }
    static uint64_t pack(uint64_t h, int32_t id) {
        return (h & 0xFFFFFFFF00000000ull) | static_cast<uint32_t>(id + 1);
    }

    std::vector<uint64_t> slots_;
    size_t mask_ = 0;
};

// (left, right) pair of non-negative 31-bit ids -> value. The first insertion of a pair wins.
// Key and value share a slot, so a hit costs one cache line.
template <typename Value>
class PairTable {
  public:
    void reserve(size_t entries) {
        slots_.assign(table_capacity(entries), Slot{});
        mask_ = slots_.size() - 1;
    }

    void insert_if_absent(int32_t left, int32_t right, const Value& value) {
        const uint64_t k = key(left, right);
        for (size_t i = slot(k);; i = (i + 1) & mask_) {
            if (slots_[i].key == k) return;
            if (slots_[i].key == 0) {
                slots_[i] = {k, value};
                return;
            }
        }
    }

    const Value* find(int32_t left, int32_t right) const {
        if (slots_.empty()) return nullptr;
        const uint64_t k = key(left, right);
        for (size_t i = slot(k);; i = (i + 1) & mask_) {
            if (slots_[i].key == k) return &slots_[i].value;
            if (slots_[i].key == 0) return nullptr;
        }
    }

  private:
    struct Slot {
        uint64_t key = 0;  // 0: empty
        Value value{};
    };
    // The top bit marks a used slot, so the pair (0, 0) is not mistaken for an empty one.
    static uint64_t key(int32_t left, int32_t right) {
        return (1ull << 63) | (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
               static_cast<uint32_t>(right);
    }
    size_t slot(uint64_t k) const {
        const uint64_t h = k * 0x9E3779B97F4A7C15ull;
        return (h ^ (h >> 32)) & mask_;
    }

    std::vector<Slot> slots_;
    size_t mask_ = 0;
};

}  // namespace strata
