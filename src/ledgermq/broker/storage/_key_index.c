/* The key index's hot path in C: hash each key and link it into its slot's chain.
 *
 * Why C: every replica indexes every message's keys (its UNIQ_KEY at least), and the Python loop
 * of KeyIndex._add (an f-string, an encode, hashlib's BLAKE2b, int.from_bytes, a seen-list, the
 * slot load and store, two struct packs and a zlib CRC per key) was a third of a follower's
 * Python samples under batched load (py-spy, 2026-11-25) and about 4.5 % of the master's.
 *
 * key_hash(topic, key) is KeyIndex's key_hash: the first 8 bytes of BLAKE2b-64 (RFC 7693, no
 * key, digest length 8) of the UTF-8 of "<topic>#<key>", read big-endian and signed.
 *
 * index_run(messages, pos, kpos, skip_first, slots, slot_pages, nslots, count, room, last,
 *           min_ts, max_ts, data)
 *     -> (status, pos, kpos, count, last, min_ts, max_ts, added, slot)
 * runs KeyIndex._add's per-key loop over messages[pos:] (each a (topic, keys, phy_offset,
 * store_timestamp) tuple), from key `kpos` of messages[pos], for as long as nothing needs the
 * Python side: it writes the slot table (`slots`, the last file's uint32s) and appends the
 * 32-byte items to `data`, exactly as the reference does, and returns where it stopped and why:
 *   DONE         every message was indexed;
 *   NEED_ROOM    key `kpos` of message `pos` needs an item past `room` (grow or roll the file);
 *   NEED_PAGE    it needs slot `slot`, whose page has no blocks yet (slot_pages[page] == 0);
 *   SAME_OFFSET  messages[pos] is at exactly `last` (a re-dispatch after a crash: only its
 *                missing keys may be added, which needs the files' chains);
 *   SLOW         messages[pos] is not one this loop takes (not a 4-tuple of str, iterable of
 *                str, two int64; a key that is not UTF-8 encodable; a negative offset): the
 *                Python reference indexes it, raising what it raises.
 * The offset check is skipped for messages[pos] when kpos > 0 (the message was begun) or
 * skip_first is true (the caller has handled its offset). A message is validated whole before
 * any of its keys changes anything, so nothing is half-done when a message is refused; an
 * exception (only MemoryError or a broken buffer) means the caller must treat the index as
 * failed. The Python loop in key_index.py stays the reference (tests/broker/
 * test_key_index_c.py compares the two with hypothesis).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define HEADER_SIZE 64
#define SLOT_SIZE 4
#define RECORD_SIZE 32
#define PAGE_BYTES 4096
#define SLOTS_PER_PAGE (PAGE_BYTES / SLOT_SIZE)
#define SLOT_BIAS (HEADER_SIZE / SLOT_SIZE)
#define HASH_BLOCK 128

enum { DONE = 0, NEED_ROOM = 1, NEED_PAGE = 2, SAME_OFFSET = 3, SLOW = 4 };

/* ------------------------------------------------------------------ BLAKE2b (RFC 7693) */

static const uint64_t blake2b_iv[8] = {
    0x6A09E667F3BCC908ULL, 0xBB67AE8584CAA73BULL, 0x3C6EF372FE94F82BULL, 0xA54FF53A5F1D36F1ULL,
    0x510E527FADE682D1ULL, 0x9B05688C2B3E6C1FULL, 0x1F83D9ABFB41BD6BULL, 0x5BE0CD19137E2179ULL,
};

static const uint8_t blake2b_sigma[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
};

typedef struct {
    uint64_t h[8];
    uint64_t t; /* bytes compressed so far (our inputs are far below 2**64) */
    unsigned char buf[HASH_BLOCK];
    size_t used; /* bytes in buf, not yet compressed */
} blake2b_state;

static uint64_t
rotr64(uint64_t x, unsigned n)
{
    return (x >> n) | (x << (64 - n));
}

static uint64_t
load_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = (v << 8) | (uint64_t)p[i];
    }
    return v;
}

#define G(a, b, c, d, x, y)                                                                     \
    do {                                                                                        \
        v[a] = v[a] + v[b] + (x);                                                               \
        v[d] = rotr64(v[d] ^ v[a], 32);                                                         \
        v[c] = v[c] + v[d];                                                                     \
        v[b] = rotr64(v[b] ^ v[c], 24);                                                         \
        v[a] = v[a] + v[b] + (y);                                                               \
        v[d] = rotr64(v[d] ^ v[a], 16);                                                         \
        v[c] = v[c] + v[d];                                                                     \
        v[b] = rotr64(v[b] ^ v[c], 63);                                                         \
    } while (0)

static void
blake2b_compress(blake2b_state *s, const unsigned char *block, int last)
{
    uint64_t m[16];
    uint64_t v[16];
    for (int i = 0; i < 16; i++) {
        m[i] = load_le64(block + 8 * i);
    }
    for (int i = 0; i < 8; i++) {
        v[i] = s->h[i];
        v[i + 8] = blake2b_iv[i];
    }
    v[12] ^= s->t; /* the counter's high word is 0 */
    if (last) {
        v[14] = ~v[14];
    }
    for (int r = 0; r < 12; r++) {
        const uint8_t *sg = blake2b_sigma[r];
        G(0, 4, 8, 12, m[sg[0]], m[sg[1]]);
        G(1, 5, 9, 13, m[sg[2]], m[sg[3]]);
        G(2, 6, 10, 14, m[sg[4]], m[sg[5]]);
        G(3, 7, 11, 15, m[sg[6]], m[sg[7]]);
        G(0, 5, 10, 15, m[sg[8]], m[sg[9]]);
        G(1, 6, 11, 12, m[sg[10]], m[sg[11]]);
        G(2, 7, 8, 13, m[sg[12]], m[sg[13]]);
        G(3, 4, 9, 14, m[sg[14]], m[sg[15]]);
    }
    for (int i = 0; i < 8; i++) {
        s->h[i] ^= v[i] ^ v[i + 8];
    }
}

static void
blake2b_init8(blake2b_state *s)
{
    memcpy(s->h, blake2b_iv, sizeof s->h);
    s->h[0] ^= 0x01010000ULL ^ 8; /* depth 1, fanout 1, no key, an 8-byte digest */
    s->t = 0;
    s->used = 0;
}

static void
blake2b_update(blake2b_state *s, const unsigned char *in, size_t len)
{
    while (len > 0) {
        if (s->used == HASH_BLOCK) {
            /* a full block is compressed only once more input follows: the last one is final */
            s->t += HASH_BLOCK;
            blake2b_compress(s, s->buf, 0);
            s->used = 0;
        }
        size_t take = HASH_BLOCK - s->used;
        if (take > len) {
            take = len;
        }
        memcpy(s->buf + s->used, in, take);
        s->used += take;
        in += take;
        len -= take;
    }
}

/* The digest's 8 bytes (little-endian h[0]) read big-endian and signed, as key_hash does. */
static int64_t
blake2b_final8(blake2b_state *s)
{
    s->t += s->used;
    memset(s->buf + s->used, 0, HASH_BLOCK - s->used);
    blake2b_compress(s, s->buf, 1);
    return (int64_t)__builtin_bswap64(s->h[0]);
}

static int64_t
hash_topic_key(const char *topic, Py_ssize_t topic_len, const char *key, Py_ssize_t key_len)
{
    blake2b_state s;
    blake2b_init8(&s);
    blake2b_update(&s, (const unsigned char *)topic, (size_t)topic_len);
    blake2b_update(&s, (const unsigned char *)"#", 1);
    blake2b_update(&s, (const unsigned char *)key, (size_t)key_len);
    return blake2b_final8(&s);
}

/* ------------------------------------------------------------------ CRC-32 (zlib's) */

static uint32_t crc_table[256];

static void
crc_init(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) {
            c = (c & 1) ? 0xEDB88320U ^ (c >> 1) : c >> 1;
        }
        crc_table[n] = c;
    }
}

static uint32_t
crc32_of(const unsigned char *p, size_t len)
{
    uint32_t c = 0xFFFFFFFFU;
    for (size_t i = 0; i < len; i++) {
        c = crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    }
    return c ^ 0xFFFFFFFFU;
}

static void
store_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) {
        p[i] = (unsigned char)(v >> (8 * i));
    }
}

/* ------------------------------------------------------------------ key_hash */

static PyObject *
key_hash(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *topic;
    PyObject *key;
    if (!PyArg_ParseTuple(args, "UU:key_hash", &topic, &key)) {
        return NULL;
    }
    Py_ssize_t topic_len;
    Py_ssize_t key_len;
    const char *t = PyUnicode_AsUTF8AndSize(topic, &topic_len);
    if (t == NULL) {
        return NULL;
    }
    const char *k = PyUnicode_AsUTF8AndSize(key, &key_len);
    if (k == NULL) {
        return NULL;
    }
    return PyLong_FromLongLong(hash_topic_key(t, topic_len, k, key_len));
}

/* ------------------------------------------------------------------ index_run */

/* A message this loop takes, its parts borrowed from the messages list (which holds them). */
typedef struct {
    const char *topic;
    Py_ssize_t topic_len;
    PyObject *keys; /* a new reference: PySequence_Fast of the keys */
    int64_t phy;
    int64_t ts;
} message_view;

/* 1: `item` is a message this loop takes (view filled, view->keys owned); 0: it is not (no
 * Python error left set); -1: an error that is not about the message (MemoryError). */
static int
view_message(PyObject *item, message_view *view)
{
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 4) {
        return 0;
    }
    PyObject *topic = PyTuple_GET_ITEM(item, 0);
    PyObject *phy = PyTuple_GET_ITEM(item, 2);
    PyObject *ts = PyTuple_GET_ITEM(item, 3);
    if (!PyUnicode_Check(topic) || !PyLong_CheckExact(phy) || !PyLong_CheckExact(ts)) {
        return 0;
    }
    int overflow = 0;
    view->phy = PyLong_AsLongLongAndOverflow(phy, &overflow);
    if (overflow || view->phy < 0) {
        return 0;
    }
    view->ts = PyLong_AsLongLongAndOverflow(ts, &overflow);
    if (overflow) {
        return 0;
    }
    view->topic = PyUnicode_AsUTF8AndSize(topic, &view->topic_len);
    if (view->topic == NULL) {
        PyErr_Clear();
        return 0;
    }
    PyObject *keys = PyTuple_GET_ITEM(item, 1);
    if (!PyList_CheckExact(keys) && !PyTuple_CheckExact(keys)) {
        return 0; /* a str or an iterator: the reference decides what it means */
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(keys);
    PyObject **items = PySequence_Fast_ITEMS(keys);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyUnicode_Check(items[i])) {
            return 0;
        }
        Py_ssize_t len;
        if (PyUnicode_AsUTF8AndSize(items[i], &len) == NULL) {
            if (PyErr_ExceptionMatches(PyExc_MemoryError)) {
                return -1;
            }
            PyErr_Clear();
            return 0;
        }
    }
    Py_INCREF(keys);
    view->keys = keys;
    return 1;
}

static PyObject *
index_run(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *messages;
    Py_ssize_t pos;
    Py_ssize_t kpos;
    int skip_first;
    Py_buffer slots = {0};
    Py_buffer pages = {0};
    Py_ssize_t nslots;
    long long count;
    long long room;
    long long last;
    long long min_ts;
    long long max_ts;
    PyObject *data;
    if (!PyArg_ParseTuple(args, "O!nnpw*y*nLLLLLO!:index_run", &PyList_Type, &messages, &pos,
                          &kpos, &skip_first, &slots, &pages, &nslots, &count, &room, &last,
                          &min_ts, &max_ts, &PyByteArray_Type, &data)) {
        return NULL;
    }
    unsigned char *out = NULL;
    size_t out_len = 0;
    size_t out_cap = 0;
    long long added = 0;
    Py_ssize_t slot = -1;
    int status = DONE;
    int64_t seen_small[16];
    int64_t *seen = seen_small;
    Py_ssize_t seen_cap = 16;
    if (nslots < 1 || slots.len < nslots * SLOT_SIZE ||
        pages.len < (nslots - 1 + SLOT_BIAS) / SLOTS_PER_PAGE + 1 || pos < 0 ||
        pos > PyList_GET_SIZE(messages) || kpos < 0) {
        PyErr_SetString(PyExc_ValueError, "index_run: slot table or position out of range");
        goto fail;
    }
    unsigned char *slot_bytes = (unsigned char *)slots.buf;
    const unsigned char *page_ready = (const unsigned char *)pages.buf;

    for (; pos < PyList_GET_SIZE(messages); pos++, kpos = 0, skip_first = 0) {
        message_view view;
        int taken = view_message(PyList_GET_ITEM(messages, pos), &view);
        if (taken < 0) {
            goto fail;
        }
        if (taken == 0) {
            status = SLOW;
            break;
        }
        if (kpos == 0 && !skip_first && view.phy <= last) {
            if (view.phy == last) {
                Py_DECREF(view.keys);
                status = SAME_OFFSET;
                break;
            }
            Py_DECREF(view.keys);
            continue; /* a re-dispatch: already here */
        }
        Py_ssize_t nkeys = PySequence_Fast_GET_SIZE(view.keys);
        PyObject **keys = PySequence_Fast_ITEMS(view.keys);
        if (nkeys > seen_cap) {
            int64_t *grown = PyMem_Malloc((size_t)nkeys * sizeof *grown);
            if (grown == NULL) {
                Py_DECREF(view.keys);
                PyErr_NoMemory();
                goto fail;
            }
            if (seen != seen_small) {
                PyMem_Free(seen);
            }
            seen = grown;
            seen_cap = nkeys;
        }
        Py_ssize_t nseen = 0;
        for (Py_ssize_t k = 0; k < nkeys; k++) {
            Py_ssize_t key_len;
            const char *key = PyUnicode_AsUTF8AndSize(keys[k], &key_len); /* cached: validated */
            if (key_len == 0) {
                continue;
            }
            int64_t h = hash_topic_key(view.topic, view.topic_len, key, key_len);
            int dup = 0;
            for (Py_ssize_t i = 0; i < nseen; i++) {
                if (seen[i] == h) {
                    dup = 1;
                    break;
                }
            }
            if (dup) {
                continue;
            }
            seen[nseen++] = h;
            if (k < kpos) {
                continue; /* indexed by an earlier call: only its hash is needed, for `seen` */
            }
            if (count >= room) {
                status = NEED_ROOM;
                kpos = k;
                break;
            }
            Py_ssize_t s = (Py_ssize_t)(h % (int64_t)nslots);
            if (s < 0) {
                s += nslots;
            }
            if (!page_ready[(s + SLOT_BIAS) / SLOTS_PER_PAGE]) {
                status = NEED_PAGE;
                slot = s;
                kpos = k;
                break;
            }
            if (out_len + RECORD_SIZE > out_cap) {
                size_t cap = out_cap ? out_cap * 2 : 64 * RECORD_SIZE;
                unsigned char *grown = PyMem_Realloc(out, cap);
                if (grown == NULL) {
                    Py_DECREF(view.keys);
                    PyErr_NoMemory();
                    goto fail;
                }
                out = grown;
                out_cap = cap;
            }
            uint32_t prev;
            memcpy(&prev, slot_bytes + (size_t)s * SLOT_SIZE, SLOT_SIZE);
            unsigned char *item = out + out_len;
            store_le(item, (uint64_t)h, 8);
            store_le(item + 8, (uint64_t)view.phy, 8);
            store_le(item + 16, (uint64_t)view.ts, 8);
            store_le(item + 24, prev, 4);
            store_le(item + 28, crc32_of(item, 28), 4);
            out_len += RECORD_SIZE;
            count += 1;
            uint32_t now = (uint32_t)count;
            memcpy(slot_bytes + (size_t)s * SLOT_SIZE, &now, SLOT_SIZE);
            if (view.ts > max_ts) {
                max_ts = view.ts;
            }
            if (view.ts < min_ts) {
                min_ts = view.ts;
            }
            last = view.phy;
            added += 1;
        }
        Py_DECREF(view.keys);
        if (status != DONE) {
            break;
        }
    }
    if (out_len > 0) {
        Py_ssize_t had = PyByteArray_GET_SIZE(data);
        if (PyByteArray_Resize(data, had + (Py_ssize_t)out_len) < 0) {
            goto fail;
        }
        memcpy(PyByteArray_AS_STRING(data) + had, out, out_len);
    }
    PyMem_Free(out);
    if (seen != seen_small) {
        PyMem_Free(seen);
    }
    PyBuffer_Release(&slots);
    PyBuffer_Release(&pages);
    return Py_BuildValue("(innLLLLLn)", status, pos, status == DONE ? (Py_ssize_t)0 : kpos, count,
                         last, min_ts, max_ts, added, slot);

fail:
    PyMem_Free(out);
    if (seen != seen_small) {
        PyMem_Free(seen);
    }
    PyBuffer_Release(&slots);
    PyBuffer_Release(&pages);
    return NULL;
}

PyDoc_STRVAR(key_hash_doc, "key_hash(topic, key) -> int\n\n"
                           "The stable signed 64-bit hash of topic#key (see key_index.key_hash).");

PyDoc_STRVAR(index_run_doc,
             "index_run(messages, pos, kpos, skip_first, slots, slot_pages, nslots, count, room, "
             "last, min_ts, max_ts, data)\n"
             "    -> (status, pos, kpos, count, last, min_ts, max_ts, added, slot)\n\n"
             "KeyIndex._add's per-key loop until it needs Python (see the module docstring).");

static PyMethodDef methods[] = {
    {"key_hash", key_hash, METH_VARARGS, key_hash_doc},
    {"index_run", index_run, METH_VARARGS, index_run_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "ledgermq.broker.storage._key_index",
    "The key index's per-key loop; ledgermq/broker/storage/key_index.py holds the reference.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__key_index(void)
{
    crc_init();
    return PyModule_Create(&module_def);
}
