/*
 * txn_state.c - transaction states, transitions and coordinator partition;
 * see txn_state.h.
 */
#include "txn_state.h"

#include <string.h>

static const char *const state_names[CN_TXN_NSTATES] = {
    [CN_TXN_EMPTY] = "Empty",
    [CN_TXN_ONGOING] = "Ongoing",
    [CN_TXN_PREPARE_COMMIT] = "PrepareCommit",
    [CN_TXN_PREPARE_ABORT] = "PrepareAbort",
    [CN_TXN_COMPLETE_COMMIT] = "CompleteCommit",
    [CN_TXN_COMPLETE_ABORT] = "CompleteAbort",
    [CN_TXN_DEAD] = "Dead",
    [CN_TXN_PREPARE_EPOCH_FENCE] = "PrepareEpochFence",
};

#define BIT(s) (1u << (s))

/*
 * For each target state, the set of states it may be entered from, as in
 * Kafka 4.x's TransactionState.VALID_PREVIOUS_STATES.  Written as "where
 * may I come from" rather than "where may I go" so it reads line by line
 * against Kafka's table.
 */
static const unsigned valid_prev[CN_TXN_NSTATES] = {
    [CN_TXN_EMPTY] = BIT(CN_TXN_EMPTY) | BIT(CN_TXN_COMPLETE_COMMIT) |
                     BIT(CN_TXN_COMPLETE_ABORT),
    [CN_TXN_ONGOING] = BIT(CN_TXN_ONGOING) | BIT(CN_TXN_EMPTY) |
                       BIT(CN_TXN_COMPLETE_COMMIT) |
                       BIT(CN_TXN_COMPLETE_ABORT),
    [CN_TXN_PREPARE_COMMIT] = BIT(CN_TXN_ONGOING),
    /* Empty and Complete*: a TV2 client may abort when unsure whether the
     * server has a transaction open (KIP-890). */
    [CN_TXN_PREPARE_ABORT] = BIT(CN_TXN_ONGOING) |
                             BIT(CN_TXN_PREPARE_EPOCH_FENCE) |
                             BIT(CN_TXN_EMPTY) |
                             BIT(CN_TXN_COMPLETE_COMMIT) |
                             BIT(CN_TXN_COMPLETE_ABORT),
    [CN_TXN_COMPLETE_COMMIT] = BIT(CN_TXN_PREPARE_COMMIT),
    [CN_TXN_COMPLETE_ABORT] = BIT(CN_TXN_PREPARE_ABORT),
    [CN_TXN_DEAD] = BIT(CN_TXN_EMPTY) | BIT(CN_TXN_COMPLETE_ABORT) |
                    BIT(CN_TXN_COMPLETE_COMMIT),
    [CN_TXN_PREPARE_EPOCH_FENCE] = BIT(CN_TXN_ONGOING),
};

const char *cn_txn_state_name(enum cn_txn_state s)
{
    if (!cn_txn_state_valid((int)s))
        return "Unknown";
    return state_names[s];
}

int cn_txn_state_parse(const char *name)
{
    int i;

    if (!name)
        return -1;
    for (i = 0; i < CN_TXN_NSTATES; i++)
        if (strcmp(name, state_names[i]) == 0)
            return i;
    return -1;
}

bool cn_txn_transition_ok(enum cn_txn_state from, enum cn_txn_state to)
{
    if (!cn_txn_state_valid((int)from) || !cn_txn_state_valid((int)to))
        return false;
    return (valid_prev[to] & BIT(from)) != 0;
}

bool cn_txn_state_expirable(enum cn_txn_state s)
{
    return s == CN_TXN_EMPTY || s == CN_TXN_COMPLETE_COMMIT ||
           s == CN_TXN_COMPLETE_ABORT;
}

/*
 * UTF-8 decoding with replacement, step for step as Java 17's
 * String.decodeUTF8_UTF16 (what new String(bytes, UTF_8) runs, and so what
 * Kafka's protocol reader produces):
 *
 *   - A malformed sequence becomes one U+FFFD per maximal valid prefix
 *     ("maximal subpart", Unicode ch. 3): the bytes that could still have
 *     started a valid sequence are replaced together, and the first byte
 *     that could not is decoded afresh.  Lone continuation bytes, C0, C1
 *     and F8-FF are one U+FFFD each; E0 80-9F, F0 80-8F and F4 90-BF cut
 *     the prefix after the lead byte; F5-F7 are a lone U+FFFD each.
 *   - Except for encoded surrogates: Java accepts ED A0-BF as a prefix, so
 *     ED A0 80 is one U+FFFD (not three) and ED A0 followed by a
 *     non-continuation byte is one U+FFFD for the two.
 *   - A valid prefix cut off by the end of the input is one U+FFFD.
 *   - Code points above U+FFFF become a surrogate pair (two units).
 */
#define REPL 0xFFFDu

static bool is_cont(uint8_t b)
{
    return (b & 0xC0) == 0x80;
}

static void hash_unit(uint32_t *h, uint32_t unit)
{
    *h = *h * 31u + unit; /* unsigned: wraps like Java's int */
}

int32_t cn_txn_java_hash(const uint8_t *s, size_t len)
{
    uint32_t h = 0;
    size_t i = 0;

    while (i < len) {
        uint8_t b1 = s[i];

        if (b1 < 0x80) {
            hash_unit(&h, b1);
            i++;
        } else if (b1 >= 0xC2 && b1 <= 0xDF) {
            if (i + 1 >= len) {
                hash_unit(&h, REPL);
                break;
            }
            if (is_cont(s[i + 1])) {
                hash_unit(&h, ((uint32_t)(b1 & 0x1F) << 6) |
                                  (s[i + 1] & 0x3F));
                i += 2;
            } else {
                hash_unit(&h, REPL);
                i += 1;
            }
        } else if (b1 >= 0xE0 && b1 <= 0xEF) {
            if (i + 2 < len) {
                uint8_t b2 = s[i + 1], b3 = s[i + 2];
                bool bad2 = (b1 == 0xE0 && b2 < 0xA0) || !is_cont(b2);
                if (bad2 || !is_cont(b3)) {
                    hash_unit(&h, REPL);
                    i += bad2 ? 1 : 2;
                } else {
                    uint32_t c = ((uint32_t)(b1 & 0x0F) << 12) |
                                 ((uint32_t)(b2 & 0x3F) << 6) | (b3 & 0x3F);
                    hash_unit(&h, (c >= 0xD800 && c <= 0xDFFF) ? REPL : c);
                    i += 3;
                }
            } else {
                hash_unit(&h, REPL);
                if (i + 1 < len &&
                    ((b1 == 0xE0 && s[i + 1] < 0xA0) || !is_cont(s[i + 1]))) {
                    i += 1; /* the second byte starts afresh */
                    continue;
                }
                break; /* a valid prefix cut off by the end */
            }
        } else if (b1 >= 0xF0 && b1 <= 0xF7) {
            if (i + 3 < len) {
                uint8_t b2 = s[i + 1], b3 = s[i + 2], b4 = s[i + 3];
                uint32_t cp = ((uint32_t)(b1 & 0x07) << 18) |
                              ((uint32_t)(b2 & 0x3F) << 12) |
                              ((uint32_t)(b3 & 0x3F) << 6) | (b4 & 0x3F);
                if (!is_cont(b2) || !is_cont(b3) || !is_cont(b4) ||
                    cp < 0x10000 || cp > 0x10FFFF) {
                    hash_unit(&h, REPL);
                    if (b1 > 0xF4 || (b1 == 0xF0 && b2 < 0x90) ||
                        (b1 == 0xF4 && b2 > 0x8F) || !is_cont(b2))
                        i += 1;
                    else if (!is_cont(b3))
                        i += 2;
                    else
                        i += 3;
                } else {
                    cp -= 0x10000;
                    hash_unit(&h, 0xD800u + (cp >> 10));
                    hash_unit(&h, 0xDC00u + (cp & 0x3FF));
                    i += 4;
                }
            } else {
                hash_unit(&h, REPL);
                if (b1 > 0xF4 ||
                    (i + 1 < len &&
                     ((b1 == 0xF0 && (s[i + 1] < 0x90 || s[i + 1] > 0xBF)) ||
                      (b1 == 0xF4 && (s[i + 1] & 0xF0) != 0x80) ||
                      !is_cont(s[i + 1])))) {
                    i += 1;
                    continue;
                }
                i += 2; /* lead and second byte */
                if (i < len && !is_cont(s[i]))
                    continue;
                break;
            }
        } else {
            /* 80-BF alone, C0, C1, F8-FF. */
            hash_unit(&h, REPL);
            i++;
        }
    }
    return (int32_t)h; /* two's complement on every platform we build */
}

int32_t cn_txn_partition_for(const uint8_t *id, size_t len,
                             int32_t partitions)
{
    int32_t h;

    if (partitions <= 0)
        return -1;
    h = cn_txn_java_hash(id, len);
    /* Kafka's Utils.abs: abs(INT_MIN) would overflow, so it is 0. */
    if (h == INT32_MIN)
        h = 0;
    else if (h < 0)
        h = -h;
    return h % partitions;
}
