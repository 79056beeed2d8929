/* The leader's batch encoder in C: append_plan.plan_leader_append without a per-entry Python loop.
 *
 * append_plan._plan_leader_append_py is the reference: this must return the same entries, data
 * pieces, index records and end position, byte for byte, and raise the same store errors
 * (tests/store/test_speedups.py compares them). The byte layouts are in entry_format.py. A batch
 * takes tens of microseconds, so the GIL is kept throughout.
 *
 * Also here: the follower's planner (plan_replicated_append, against
 * append_plan._plan_replicated_append_py; tests/store/test_speedups_replicated.py) and the
 * recovery scan (scan_entries, against recovery._scan; tests/store/test_speedups_scan.py), and
 * the replication PUSH entry codec (encode_entries / decode_entries, against ledger/codec.py's
 * _encode_entries_py / _decode_entries_py; tests/ledger/test_codec_speedups.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_SSE42_CRC 1
#include <nmmintrin.h>
#endif

#define HEADER_SIZE 48
#define RECORD_SIZE 32
#define MIN_BLANK_LEN 8
/* Positions stay below 2**62 and segments below 2**60, so no sum below can overflow a long long
 * (a position grows by at most two segments per entry). That is a 4 EiB log. */
#define MAX_POS (1LL << 62)
#define MAX_SEGMENT_BYTES (1LL << 60)

static PyObject *EntryTooLargeError, *InconsistentLogError, *EntryType;
static PyObject *Entry; /* entry_format.Entry: the only class encode_entries takes */

/* ---------------------------------------------------------------- CRC-32C (Castagnoli)
 * The crc32c package's convention (and zlib.crc32's): ``crc`` is the CRC of the bytes before
 * ``p``, so crc(b, crc(a)) == crc(a + b). */

static uint32_t crc_table[8][256]; /* slicing-by-8, for CPUs without SSE4.2 */

static void
crc_table_init(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][n] = c;
    }
    for (int t = 1; t < 8; t++)
        for (uint32_t n = 0; n < 256; n++)
            crc_table[t][n] = (crc_table[t - 1][n] >> 8) ^ crc_table[0][crc_table[t - 1][n] & 0xFF];
}

static uint32_t
crc32c_portable(uint32_t crc, const unsigned char *p, size_t n)
{
    crc = ~crc;
    for (; n >= 8; n -= 8, p += 8) {
        /* Byte loads keep this independent of the host's endianness and alignment. */
        uint32_t lo = crc ^ (p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        crc = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^
              crc_table[5][(lo >> 16) & 0xFF] ^ crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^
              crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
    }
    while (n--)
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xFF];
    return ~crc;
}

#ifdef HAVE_SSE42_CRC
/* The crc32 instruction has a latency of 3 cycles but a throughput of 1, so three streams over
 * consecutive SHORT-byte blocks run up to 3x faster than one (a 1 KiB body: about 2x). Their
 * CRCs are then joined: the raw CRC register is linear, so crc(A || B) = shift(crc(A)) ^ crc0(B),
 * where shift runs a register over SHORT zero bytes (the crc_short tables, built at import). */
#define SHORT 256
static uint32_t crc_short[4][256];

static void
crc_short_init(void)
{
    for (int k = 0; k < 4; k++)
        for (uint32_t b = 0; b < 256; b++) {
            uint32_t c = b << (8 * k);
            for (int z = 0; z < SHORT; z++)
                c = (c >> 8) ^ crc_table[0][c & 0xFF]; /* one zero byte */
            crc_short[k][b] = c;
        }
}

static inline uint64_t
shift_short(uint64_t c)
{
    return crc_short[0][c & 0xFF] ^ crc_short[1][(c >> 8) & 0xFF] ^
           crc_short[2][(c >> 16) & 0xFF] ^ crc_short[3][(c >> 24) & 0xFF];
}

static inline uint64_t
load64(const unsigned char *p)
{
    uint64_t word;
    memcpy(&word, p, 8); /* an unaligned load: one mov */
    return word;
}

__attribute__((target("sse4.2"))) static uint32_t
crc32c_sse42(uint32_t crc, const unsigned char *p, size_t n)
{
    uint64_t c = ~crc;
    for (; n >= 3 * SHORT; n -= 3 * SHORT, p += 3 * SHORT) {
        uint64_t c1 = 0, c2 = 0;
        for (size_t k = 0; k < SHORT; k += 8) {
            c = _mm_crc32_u64(c, load64(p + k));
            c1 = _mm_crc32_u64(c1, load64(p + SHORT + k));
            c2 = _mm_crc32_u64(c2, load64(p + 2 * SHORT + k));
        }
        c = shift_short(shift_short(c) ^ c1) ^ c2;
    }
    for (; n >= 8; n -= 8, p += 8)
        c = _mm_crc32_u64(c, load64(p));
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = _mm_crc32_u8(c32, *p++);
    return ~c32;
}
#endif

/* Chosen at import from what the CPU running us has, not from what the compiler assumed. */
static uint32_t (*crc32c)(uint32_t, const unsigned char *, size_t) = crc32c_portable;

/* ---------------------------------------------------------------- encoding helpers */

static inline void
put32(char *p, uint32_t v) /* big-endian, as struct's ">" */
{
    p[0] = (char)(v >> 24), p[1] = (char)(v >> 16), p[2] = (char)(v >> 8), p[3] = (char)v;
}

static inline void
put64(char *p, uint64_t v)
{
    put32(p, (uint32_t)(v >> 32)), put32(p + 4, (uint32_t)v);
}

/* An int argument checked against the width of its field. */
static int
as_field(PyObject *obj, const char *what, long long min, long long max, long long *out)
{
    *out = PyLong_AsLongLong(obj);
    if (*out == -1 && PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_OverflowError))
        return -1;
    if (PyErr_Occurred() || *out < min || *out > max) {
        PyErr_Clear();
        PyErr_Format(PyExc_OverflowError, "%s %S does not fit its field", what, obj);
        return -1;
    }
    return 0;
}

/* A new instance of the tuple subclass ``cls`` holding items[0..9), built without a call (as
 * tuple.__new__(cls, items) would). Steals the nine references, NULLs included. */
static PyObject *
build_entry(PyTypeObject *cls, PyObject *items[9])
{
    PyObject *entry = cls->tp_alloc(cls, 9);
    int failed = entry == NULL;
    for (int k = 0; k < 9; k++) {
        failed |= items[k] == NULL;
        if (entry != NULL)
            PyTuple_SET_ITEM(entry, k, items[k]); /* the dealloc skips NULL items */
        else
            Py_XDECREF(items[k]);
    }
    if (failed)
        Py_CLEAR(entry);
    return entry;
}

/* An Entry for plan_leader_append. */
static PyObject *
new_entry(PyTypeObject *cls, long long index, PyObject *term, long long pos, PyObject *size,
          PyObject *channel, PyObject *body, PyObject *entry_type, uint32_t body_crc,
          uint32_t chain)
{
    PyObject *items[9] = {PyLong_FromLongLong(index), Py_NewRef(term), PyLong_FromLongLong(pos),
                          Py_NewRef(size), Py_NewRef(channel), Py_NewRef(body),
                          Py_NewRef(entry_type), PyLong_FromUnsignedLong(body_crc),
                          PyLong_FromUnsignedLong(chain)};
    return build_entry(cls, items);
}

/* Takes an entry out of the cyclic garbage collector when no reference cycle can run through it.
 *
 * A log keeps its entries, so a long-lived MemoryLedgerStore holds millions of them, and every
 * full collection would walk them all (at batch 256, a quarter of benchmarks/raft_core.py's CPU
 * time went there). CPython untracks a plain tuple of untracked items itself, but not a tuple
 * subclass such as Entry, and not one that holds an EntryType member (an enum member is a GC
 * object). A member lives as long as its class, so a cycle through it is never garbage: an entry
 * whose items are untracked objects (ints, bytes) or EntryType members cannot be part of
 * collectable garbage, and untracking it changes nothing but the collector's work. */
static void
untrack_entry(PyObject *entry)
{
    if (!PyObject_GC_IsTracked(entry))
        return;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(entry); k++) {
        PyObject *item = PyTuple_GET_ITEM(entry, k);
        if (PyObject_GC_IsTracked(item) && !Py_IS_TYPE(item, (PyTypeObject *)EntryType))
            return;
    }
    PyObject_GC_UnTrack(entry);
}

/* Appends (start, piece) to writes; always consumes the reference to piece. */
static int
add_write(PyObject *writes, long long start, PyObject *piece)
{
    PyObject *write = Py_BuildValue("(LN)", start, piece); /* "N" consumes even on failure */
    int rc = write == NULL ? -1 : PyList_Append(writes, write);
    Py_XDECREF(write);
    return rc;
}

/* entry_format.ENTRY_HEADER's first 36 bytes (">iiqqqi"), the ones the chain CRC covers. */
static inline void
put_header36(char *out, int32_t magic, int32_t size, long long index, long long term,
             long long pos, int32_t channel)
{
    put32(out, (uint32_t)magic);
    put32(out + 4, (uint32_t)size);
    put64(out + 8, (uint64_t)index);
    put64(out + 16, (uint64_t)term);
    put64(out + 24, (uint64_t)pos);
    put32(out + 32, (uint32_t)channel);
}

/* The header's last 12 bytes and the body. */
static inline void
put_tail_and_body(char *out, uint32_t chain, uint32_t body_crc, const char *body,
                  Py_ssize_t body_len)
{
    put32(out + 36, chain);
    put32(out + 40, body_crc);
    put32(out + 44, (uint32_t)body_len);
    memcpy(out + HEADER_SIZE, body, (size_t)body_len);
}

/* One entry_format.INDEX_RECORD (">iqiqq"). */
static inline void
put_index_record(char *rec, int32_t magic, long long pos, int32_t size, long long index,
                 long long term)
{
    put32(rec, (uint32_t)magic);
    put64(rec + 4, (uint64_t)pos);
    put32(rec + 12, (uint32_t)size);
    put64(rec + 16, (uint64_t)index);
    put64(rec + 24, (uint64_t)term);
}

/* A new piece of ``len`` bytes in *piece; returns where to write, NULL on error. */
static char *
open_piece(PyObject **piece, Py_ssize_t len)
{
    *piece = PyBytes_FromStringAndSize(NULL, len);
    return *piece == NULL ? NULL : PyBytes_AS_STRING(*piece);
}

/* Ends the current piece with a BLANK record (magic -1, then the ``blank`` bytes left in the
 * segment) and hands it to writes; always consumes *piece. */
static int
close_piece_with_blank(PyObject *writes, char *out, long long blank, long long chunk_start,
                       PyObject **piece)
{
    put32(out, UINT32_MAX);
    put32(out + 4, (uint32_t)blank);
    int rc = add_write(writes, chunk_start, *piece);
    *piece = NULL;
    return rc;
}

/* layout.max_body_size: the largest body a segment of segment_bytes can hold, capped. */
static inline long long
max_body_size(long long segment_bytes, long long max_body_bytes)
{
    long long max_size = segment_bytes - MIN_BLANK_LEN - HEADER_SIZE;
    return max_body_bytes < max_size ? max_body_bytes : max_size;
}

/* ---------------------------------------------------------------- plan_leader_append */

PyDoc_STRVAR(plan_doc,
"plan_leader_append(next_index, write_pos, end_term, chain_crc, term, bodies, channel,\n"
"                   entry_type, segment_bytes, max_body_bytes, entry_class, /)\n--\n\n"
"(entries, data_writes, index_records, end_pos) as append_plan.plan_leader_append plans them.");

static PyObject *
plan_leader_append(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    long long next_index, write_pos, end_term, chain_arg, term, channel, magic, segment_bytes,
        max_body_bytes;
    if (nargs != 11)
        return PyErr_Format(PyExc_TypeError, "plan_leader_append takes 11 arguments, not %zd",
                            nargs);
    if (as_field(args[0], "next_index", LLONG_MIN, LLONG_MAX, &next_index) < 0 ||
        as_field(args[1], "write_pos", 0, MAX_POS, &write_pos) < 0 ||
        as_field(args[2], "end_term", LLONG_MIN, LLONG_MAX, &end_term) < 0 ||
        as_field(args[3], "chain_crc", 0, UINT32_MAX, &chain_arg) < 0 ||
        as_field(args[4], "term", LLONG_MIN, LLONG_MAX, &term) < 0 ||
        as_field(args[6], "channel", INT32_MIN, INT32_MAX, &channel) < 0 ||
        as_field(args[7], "entry_type", INT32_MIN, INT32_MAX, &magic) < 0 ||
        as_field(args[8], "segment_bytes", 1, MAX_SEGMENT_BYTES, &segment_bytes) < 0 ||
        as_field(args[9], "max_body_bytes", LLONG_MIN, LLONG_MAX, &max_body_bytes) < 0)
        return NULL;
    PyTypeObject *entry_class = (PyTypeObject *)args[10];
    if (!PyType_Check(args[10]) || !PyType_IsSubtype(entry_class, &PyTuple_Type))
        return PyErr_Format(PyExc_TypeError, "entry_class must be a tuple subclass");
    if (term < end_term)
        return PyErr_Format(InconsistentLogError,
                            "cannot append in term %S: the log already ends with term %S",
                            args[4], args[2]);
    long long max_size = max_body_size(segment_bytes, max_body_bytes);

    PyObject *seq = PySequence_Fast(args[5], "bodies must be a sequence");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **bodies = PyMem_Calloc(n + 1, sizeof(PyObject *));
    Py_ssize_t *piece_len = PyMem_Calloc(n + 1, sizeof(Py_ssize_t)); /* <= 1 roll per entry */
    PyObject *entries = PyList_New(n), *writes = PyList_New(0), *records = NULL, *piece = NULL;
    PyObject *result = NULL, *size_obj = NULL;
    if (bodies == NULL || piece_len == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (entries == NULL || writes == NULL)
        goto done;
    if (next_index > LLONG_MAX - n) {
        PyErr_Format(PyExc_OverflowError, "index %lld + %zd entries overflows", next_index, n);
        goto done;
    }

    /* Pass 1: an immutable bytes for every body (the Entry keeps it; a caller's buffer is copied
     * once, here), sizes checked in order, and the length of each segment's piece, so that pass 2
     * fills pre-sized bytes objects instead of joining. Every error is raised here. */
    long long pos = write_pos;
    long long room_end = pos - pos % segment_bytes + segment_bytes - MIN_BLANK_LEN;
    Py_ssize_t pieces = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        bodies[i] = PyBytes_CheckExact(item) ? Py_NewRef(item) : PyBytes_FromObject(item);
        if (bodies[i] == NULL)
            goto done;
        Py_ssize_t body_len = PyBytes_GET_SIZE(bodies[i]);
        if (body_len > max_size) {
            PyErr_Format(EntryTooLargeError,
                         "entry body of %zd bytes exceeds the maximum of %lld bytes", body_len,
                         max_size);
            goto done;
        }
        long long size = HEADER_SIZE + (long long)body_len;
        if (size > INT32_MAX || pos > MAX_POS) {
            PyErr_Format(PyExc_OverflowError, "entry of %lld bytes at %lld", size, pos);
            goto done;
        }
        if (pos + size > room_end) {
            piece_len[pieces++] += MIN_BLANK_LEN; /* the BLANK; the segment's rest is not written */
            pos = room_end + MIN_BLANK_LEN;
            room_end += segment_bytes;
        }
        piece_len[pieces] += size;
        pos += size;
    }
    long long end_pos = pos;
    if ((records = PyBytes_FromStringAndSize(NULL, n * RECORD_SIZE)) == NULL)
        goto done;
    char *rec = PyBytes_AS_STRING(records), *out = NULL;

    /* Pass 2: encode, step for step as the reference loop does. */
    pos = write_pos;
    room_end = pos - pos % segment_bytes + segment_bytes - MIN_BLANK_LEN;
    long long chunk_start = pos, index = next_index;
    uint32_t chain = (uint32_t)chain_arg;
    int32_t last_size = -1; /* batches often repeat a size: share its int */
    Py_ssize_t piece_no = 0;
    if (n > 0 && (out = open_piece(&piece, piece_len[0])) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *body = PyBytes_AS_STRING(bodies[i]);
        Py_ssize_t body_len = PyBytes_GET_SIZE(bodies[i]);
        int32_t size = HEADER_SIZE + (int32_t)body_len;
        if (pos + size > room_end) {
            long long remaining = room_end + MIN_BLANK_LEN - pos;
            if (close_piece_with_blank(writes, out, remaining, chunk_start, &piece) < 0)
                goto done;
            chunk_start = pos += remaining;
            room_end += segment_bytes;
            if ((out = open_piece(&piece, piece_len[++piece_no])) == NULL)
                goto done;
        }
        uint32_t body_crc = crc32c(0, (const unsigned char *)body, (size_t)body_len);
        put_header36(out, (int32_t)magic, size, index, term, pos, (int32_t)channel);
        /* The chain CRC covers ">iiqqqiI": these 36 header bytes, then bodyCrc. */
        char crc_be[4];
        put32(crc_be, body_crc);
        chain = crc32c(crc32c(chain, (const unsigned char *)out, 36), (unsigned char *)crc_be, 4);
        put_tail_and_body(out, chain, body_crc, body, body_len);
        out += size;
        put_index_record(rec, (int32_t)magic, pos, size, index, term);
        rec += RECORD_SIZE;

        if (size != last_size) {
            Py_XSETREF(size_obj, PyLong_FromLong(size));
            if (size_obj == NULL)
                goto done;
            last_size = size;
        }
        PyObject *entry = new_entry(entry_class, index, args[4], pos, size_obj, args[6],
                                    bodies[i], args[7], body_crc, chain);
        if (entry == NULL)
            goto done;
        untrack_entry(entry);
        PyList_SET_ITEM(entries, i, entry);
        index++;
        pos += size;
    }
    if (piece != NULL) {
        int rc = add_write(writes, chunk_start, piece);
        piece = NULL;
        if (rc < 0)
            goto done;
    }
    result = Py_BuildValue("(OOOL)", entries, writes, records, end_pos);
done:
    for (Py_ssize_t i = 0; bodies != NULL && i < n; i++)
        Py_XDECREF(bodies[i]);
    PyMem_Free(bodies);
    PyMem_Free(piece_len);
    Py_XDECREF(piece);
    Py_XDECREF(size_obj);
    Py_XDECREF(records);
    Py_XDECREF(entries);
    Py_XDECREF(writes);
    Py_DECREF(seq);
    return result;
}

/* ---------------------------------------------------------------- plan_replicated_append
 * append_plan._plan_replicated_append_py without a per-entry Python loop: a follower checks the
 * entries its leader sent against its log (index, term, size, position, body CRC, chain CRC) and
 * encodes them byte for byte as they are.
 *
 * Only the common case is handled here: a batch that passes every check, of Entry tuples whose
 * fields are plain ints in range and whose bodies are bytes. For anything else (a failed check,
 * a field the reference would convert or reject with struct.error) this returns None before
 * building anything, and the caller runs the reference, which then raises its own error with
 * its own message or handles the odd input its own way. So whatever this does return, the
 * reference returns too (tests/store/test_speedups.py checks that), and every error comes from
 * the reference. */

/* ``obj`` as a long long if it is an exact int within [min, max]; 0 otherwise (no error set). */
static inline int
plain_int(PyObject *obj, long long min, long long max, long long *out)
{
    int overflow;
    if (!PyLong_CheckExact(obj))
        return 0;
    *out = PyLong_AsLongLongAndOverflow(obj, &overflow);
    return !overflow && *out >= min && *out <= max;
}

struct received {
    const char *body;
    long long index, term, pos, body_len;
    int32_t magic, size, channel;
    uint32_t chain, body_crc;
};

/* Checks entries[0..n) as the reference loop does; 1 if all pass, else 0. Fills ``out`` and the
 * length of each segment's piece (<= 1 roll per entry) and sets ``*end_pos``. */
static int
check_received(PyObject *const *items, Py_ssize_t n, PyTypeObject *entry_class,
               long long next_index, long long write_pos, long long end_term, uint32_t chain,
               int verify_chain, long long segment_bytes, long long max_size,
               struct received *out, Py_ssize_t *piece_len, long long *end_pos)
{
    long long pos = write_pos, index = next_index, term = end_term;
    Py_ssize_t pieces = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = items[i];
        struct received *r = &out[i];
        if (Py_TYPE(item) != entry_class || PyTuple_GET_SIZE(item) != 9)
            return 0;
        PyObject *body = PyTuple_GET_ITEM(item, 5), *entry_type = PyTuple_GET_ITEM(item, 6);
        long long magic, size, channel, body_crc, chain_crc;
        if (!PyBytes_CheckExact(body) || !PyLong_Check(entry_type))
            return 0;
        r->body = PyBytes_AS_STRING(body);
        r->body_len = PyBytes_GET_SIZE(body);
        if (r->body_len > max_size || index == LLONG_MAX)
            return 0;
        if (!plain_int(PyTuple_GET_ITEM(item, 0), index, index, &r->index) ||
            !plain_int(PyTuple_GET_ITEM(item, 1), term, LLONG_MAX, &r->term) ||
            !plain_int(PyTuple_GET_ITEM(item, 3), HEADER_SIZE + r->body_len,
                       HEADER_SIZE + r->body_len, &size) ||
            size > INT32_MAX)
            return 0;
        long long remaining = segment_bytes - pos % segment_bytes, entry_pos = pos;
        if (size + MIN_BLANK_LEN > remaining) {
            if (remaining > INT32_MAX) /* the BLANK's size field would not fit */
                return 0;
            entry_pos = pos + remaining;
        }
        if (!plain_int(PyTuple_GET_ITEM(item, 2), entry_pos, entry_pos, &r->pos))
            return 0;
        uint32_t crc = crc32c(0, (const unsigned char *)r->body, (size_t)r->body_len);
        if (!plain_int(PyTuple_GET_ITEM(item, 7), crc, crc, &body_crc) ||
            !plain_int(PyTuple_GET_ITEM(item, 4), INT32_MIN, INT32_MAX, &channel) ||
            !plain_int(PyTuple_GET_ITEM(item, 8), 0, UINT32_MAX, &chain_crc))
            return 0;
        int overflow;
        magic = PyLong_AsLongLongAndOverflow(entry_type, &overflow);
        if (overflow || magic < INT32_MIN || magic > INT32_MAX)
            return 0;
        r->magic = (int32_t)magic, r->size = (int32_t)size, r->channel = (int32_t)channel;
        r->chain = (uint32_t)chain_crc, r->body_crc = crc;
        if (verify_chain) {
            /* The chain CRC covers ">iiqqqiI": the header's first 36 bytes, then bodyCrc. */
            char input[40];
            put32(input, r->magic);
            put32(input + 4, r->size);
            put64(input + 8, (uint64_t)r->index);
            put64(input + 16, (uint64_t)r->term);
            put64(input + 24, (uint64_t)r->pos);
            put32(input + 32, (uint32_t)r->channel);
            put32(input + 36, crc);
            if (crc32c(chain, (const unsigned char *)input, sizeof input) != r->chain)
                return 0;
        }
        if (entry_pos != pos)
            piece_len[pieces++] += MIN_BLANK_LEN;
        piece_len[pieces] += size;
        chain = r->chain;
        verify_chain = 1;
        term = r->term;
        index++;
        pos = entry_pos + size;
        if (pos > MAX_POS)
            return 0;
    }
    *end_pos = pos;
    return 1;
}

PyDoc_STRVAR(replicated_doc,
"plan_replicated_append(next_index, write_pos, end_term, chain_crc, verify_chain, entries,\n"
"                       segment_bytes, max_body_bytes, entry_class, /)\n--\n\n"
"(entries, data_writes, index_records, end_pos) as append_plan.plan_replicated_append plans\n"
"them, or None when the batch fails a check or holds anything but plain Entry tuples (the\n"
"caller then runs the reference, which raises the error).");

static PyObject *
plan_replicated_append(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    long long next_index, write_pos, end_term, chain_arg, segment_bytes, max_body_bytes;
    if (nargs != 9)
        return PyErr_Format(PyExc_TypeError,
                            "plan_replicated_append takes 9 arguments, not %zd", nargs);
    PyTypeObject *entry_class = (PyTypeObject *)args[8];
    if (!PyType_Check(args[8]) || !PyType_IsSubtype(entry_class, &PyTuple_Type))
        return PyErr_Format(PyExc_TypeError, "entry_class must be a tuple subclass");
    int verify_chain = PyObject_IsTrue(args[4]);
    if (verify_chain < 0)
        return NULL;
    if (!plain_int(args[0], LLONG_MIN, LLONG_MAX, &next_index) ||
        !plain_int(args[1], 0, MAX_POS, &write_pos) ||
        !plain_int(args[2], LLONG_MIN, LLONG_MAX, &end_term) ||
        !plain_int(args[3], 0, UINT32_MAX, &chain_arg) ||
        !plain_int(args[6], 1, MAX_SEGMENT_BYTES, &segment_bytes) ||
        !plain_int(args[7], LLONG_MIN, LLONG_MAX, &max_body_bytes))
        Py_RETURN_NONE;
    long long max_size = max_body_size(segment_bytes, max_body_bytes);

    PyObject *seq = PySequence_Fast(args[5], "entries must be a sequence");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    struct received *received = PyMem_Calloc(n + 1, sizeof(struct received));
    Py_ssize_t *piece_len = PyMem_Calloc(n + 1, sizeof(Py_ssize_t));
    PyObject *accepted = NULL, *writes = NULL, *records = NULL, *piece = NULL, *result = NULL;
    long long end_pos = write_pos;
    if (received == NULL || piece_len == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* Pass 1: every check, before anything is built. */
    if (!check_received(PySequence_Fast_ITEMS(seq), n, entry_class, next_index, write_pos,
                        end_term, (uint32_t)chain_arg, verify_chain, segment_bytes, max_size,
                        received, piece_len, &end_pos)) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    /* Pass 2: encode into pre-sized pieces, as the reference loop joins them. */
    if ((accepted = PyList_New(n)) == NULL || (writes = PyList_New(0)) == NULL ||
        (records = PyBytes_FromStringAndSize(NULL, n * RECORD_SIZE)) == NULL)
        goto done;
    char *rec = PyBytes_AS_STRING(records), *out = NULL;
    long long pos = write_pos, chunk_start = write_pos;
    Py_ssize_t piece_no = 0;
    if (n > 0 && (out = open_piece(&piece, piece_len[0])) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        const struct received *r = &received[i];
        if (r->pos != pos) {
            if (close_piece_with_blank(writes, out, r->pos - pos, chunk_start, &piece) < 0)
                goto done;
            chunk_start = pos = r->pos;
            if ((out = open_piece(&piece, piece_len[++piece_no])) == NULL)
                goto done;
        }
        put_header36(out, r->magic, r->size, r->index, r->term, pos, r->channel);
        put_tail_and_body(out, r->chain, r->body_crc, r->body, r->body_len);
        out += r->size;
        put_index_record(rec, r->magic, pos, r->size, r->index, r->term);
        rec += RECORD_SIZE;

        PyObject *entry = PySequence_Fast_GET_ITEM(seq, i);
        untrack_entry(entry); /* the log keeps it (most often, the leader's encoder did this) */
        PyList_SET_ITEM(accepted, i, Py_NewRef(entry));
        pos += r->size;
    }
    if (piece != NULL) {
        int rc = add_write(writes, chunk_start, piece);
        piece = NULL;
        if (rc < 0)
            goto done;
    }
    result = Py_BuildValue("(OOOL)", accepted, writes, records, end_pos);
done:
    PyMem_Free(received);
    PyMem_Free(piece_len);
    Py_XDECREF(piece);
    Py_XDECREF(records);
    Py_XDECREF(accepted);
    Py_XDECREF(writes);
    Py_DECREF(seq);
    return result;
}

/* ---------------------------------------------------------------- scan_entries
 * recovery._scan's forward scan over one data segment, without a per-entry Python step.
 * The loop in recovery._scan is the reference: every check here is one of its checks, in its
 * order, with its reason string. Whatever this does not handle exactly as the reference does (a BLANK record,
 * a zero magic and size, an index record outside the given index segment, odd sizes whose body
 * slice Python would compute differently) is handed back: the scan stops *before* that entry and
 * the caller runs the reference step on it. */

static inline uint32_t
get32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static inline uint64_t
get64(const unsigned char *p)
{
    return (uint64_t)get32(p) << 32 | get32(p + 4);
}

enum scan_stop {
    STOP_HANDOFF,   /* the caller takes the entry at off */
    STOP_SHORT,     /* "only {remaining} bytes left in segment" */
    STOP_TRUNCATED, /* "truncated entry header" */
    STOP_MAGIC,
    STOP_SIZE,
    STOP_PAST_END,
    STOP_POS,
    STOP_INDEX,
    STOP_TERM,
    STOP_BODY_CRC,
    STOP_CHAIN_CRC,
};

struct scan_state {
    long long off, prev_index, prev_term, prev_chain, begin_index, scanned, rewritten;
    /* the fields of the entry a bad-entry stop is about */
    long long magic, size, index, term, pos, body_len, here, remaining;
};

static enum scan_stop
scan_run(struct scan_state *s, const unsigned char *data, long long seg_size, long long limit,
         long long base, unsigned char *records, long long index_base, long long index_len)
{
    while (s->off >= 0 && s->off < limit) {
        long long off = s->off;
        const unsigned char *h = data + off;
        long long remaining = seg_size - off;
        s->remaining = remaining;
        if (remaining < MIN_BLANK_LEN)
            return STOP_SHORT;
        int32_t magic = (int32_t)get32(h), size = (int32_t)get32(h + 4);
        if (magic == -1 || (magic == 0 && size == 0))
            return STOP_HANDOFF; /* a BLANK, or maybe the end of the log */
        if (remaining < HEADER_SIZE)
            return STOP_TRUNCATED;
        long long idx = (long long)get64(h + 8), term = (long long)get64(h + 16),
                  epos = (long long)get64(h + 24);
        uint32_t chain = get32(h + 36), crc = get32(h + 40);
        int32_t body_len = (int32_t)get32(h + 44);
        s->magic = magic, s->size = size, s->index = idx, s->term = term, s->pos = epos;
        s->body_len = body_len, s->here = base + off;
        if (magic < 1 || magic > 3)
            return STOP_MAGIC;
        if ((long long)size != HEADER_SIZE + (long long)body_len)
            return STOP_SIZE;
        if ((long long)size + MIN_BLANK_LEN > remaining)
            return STOP_PAST_END;
        if (epos != base + off)
            return STOP_POS;
        if (s->prev_index >= 0 && (s->prev_index == LLONG_MAX || idx != s->prev_index + 1))
            return STOP_INDEX;
        if (term < s->prev_term)
            return STOP_TERM;
        if (size < HEADER_SIZE)
            return STOP_HANDOFF; /* Python slices such a body its own way: let it */
        if (crc32c(0, h + HEADER_SIZE, (size_t)(size - HEADER_SIZE)) != crc)
            return STOP_BODY_CRC;
        if (s->prev_chain >= 0) {
            uint32_t expect = crc32c((uint32_t)s->prev_chain, h, 36);
            if (crc32c(expect, h + 40, 4) != chain)
                return STOP_CHAIN_CRC;
        }
        /* The index record must agree; it is derived data, so rewrite it when it does not. */
        if (idx < 0 || idx > LLONG_MAX / RECORD_SIZE || records == NULL)
            return STOP_HANDOFF;
        long long rec_off = idx * RECORD_SIZE - index_base;
        if (rec_off < 0 || rec_off + RECORD_SIZE > index_len)
            return STOP_HANDOFF; /* another index segment: the caller switches */
        unsigned char want[RECORD_SIZE];
        memcpy(want, h, 4);             /* magic */
        memcpy(want + 4, h + 24, 8);    /* pos */
        memcpy(want + 12, h + 4, 4);    /* size */
        memcpy(want + 16, h + 8, 16);   /* index, term */
        if (memcmp(records + rec_off, want, RECORD_SIZE) != 0) {
            memcpy(records + rec_off, want, RECORD_SIZE);
            s->rewritten++;
        }
        if (s->begin_index < 0)
            s->begin_index = idx;
        s->prev_index = idx;
        s->prev_term = term;
        s->prev_chain = chain;
        s->scanned++;
        s->off = off + size;
    }
    return STOP_HANDOFF;
}

static PyObject *
scan_reason(enum scan_stop stop, const struct scan_state *s)
{
    switch (stop) {
    case STOP_HANDOFF:
        Py_RETURN_NONE;
    case STOP_SHORT:
        return PyUnicode_FromFormat("only %lld bytes left in segment", s->remaining);
    case STOP_TRUNCATED:
        return PyUnicode_FromString("truncated entry header");
    case STOP_MAGIC:
        return PyUnicode_FromFormat("unknown magic %lld", s->magic);
    case STOP_SIZE:
        return PyUnicode_FromFormat("size %lld does not match body length %lld + 48", s->size,
                                    s->body_len);
    case STOP_PAST_END:
        return PyUnicode_FromFormat("entry of %lld bytes runs past the end of its segment",
                                    s->size);
    case STOP_POS:
        return PyUnicode_FromFormat("entry says it is at position %lld, it is at %lld", s->pos,
                                    s->here);
    case STOP_INDEX:
        return PyUnicode_FromFormat("index %lld does not follow %lld", s->index, s->prev_index);
    case STOP_TERM:
        return PyUnicode_FromFormat("term %lld of entry %lld is lower than the previous %lld",
                                    s->term, s->index, s->prev_term);
    case STOP_BODY_CRC:
        return PyUnicode_FromFormat("body CRC mismatch in entry %lld", s->index);
    case STOP_CHAIN_CRC:
        return PyUnicode_FromFormat(
            "chain CRC mismatch in entry %lld: its header or a predecessor changed", s->index);
    }
    return PyErr_Format(PyExc_SystemError, "unknown scan stop %d", (int)stop);
}

PyDoc_STRVAR(scan_doc,
"scan_entries(data, off, limit, base, prev_index, prev_term, prev_chain, begin_index,\n"
"             index, index_base, /)\n--\n\n"
"Scan the entries of one data segment (data, mapped at log position base) from file offset\n"
"off while off < limit, as the loop in recovery._scan does one at a time, checking each entry's\n"
"index record in index (one index segment starting at index_base, or None) and rewriting it\n"
"when it differs. Returns (off, scanned, rewritten, prev_index, prev_term, prev_chain,\n"
"begin_index, reason): reason is the bad entry's at off, or None when the caller is to take the\n"
"entry at off (a BLANK, a zero header, an index record elsewhere, the limit).");

static PyObject *
scan_entries(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    struct scan_state s = {0};
    long long off, limit, base, index_base = 0;
    if (nargs != 10)
        return PyErr_Format(PyExc_TypeError, "scan_entries takes 10 arguments, not %zd", nargs);
    if (as_field(args[1], "off", LLONG_MIN, LLONG_MAX, &off) < 0 ||
        as_field(args[2], "limit", LLONG_MIN, LLONG_MAX, &limit) < 0 ||
        as_field(args[3], "base", 0, MAX_POS, &base) < 0 ||
        as_field(args[4], "prev_index", LLONG_MIN, LLONG_MAX, &s.prev_index) < 0 ||
        as_field(args[5], "prev_term", LLONG_MIN, LLONG_MAX, &s.prev_term) < 0 ||
        as_field(args[6], "prev_chain", -1, UINT32_MAX, &s.prev_chain) < 0 ||
        as_field(args[7], "begin_index", LLONG_MIN, LLONG_MAX, &s.begin_index) < 0 ||
        as_field(args[9], "index_base", 0, MAX_POS, &index_base) < 0)
        return NULL;
    Py_buffer data, index = {0};
    if (PyObject_GetBuffer(args[0], &data, PyBUF_SIMPLE) < 0)
        return NULL;
    if (args[8] != Py_None && PyObject_GetBuffer(args[8], &index, PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    enum scan_stop stop = STOP_HANDOFF;
    if (data.len > MAX_SEGMENT_BYTES || index.len > MAX_SEGMENT_BYTES) {
        PyErr_SetString(PyExc_OverflowError, "segment too large");
        goto done;
    }
    if (limit > data.len)
        limit = data.len;
    s.off = off;
    Py_BEGIN_ALLOW_THREADS /* the buffers stay exported (the maps cannot close) until released */
    stop = scan_run(&s, data.buf, data.len, limit, base, index.buf, index_base, index.len);
    Py_END_ALLOW_THREADS
done:
    PyBuffer_Release(&data);
    if (index.obj != NULL)
        PyBuffer_Release(&index);
    if (PyErr_Occurred())
        return NULL;
    PyObject *reason = scan_reason(stop, &s);
    if (reason == NULL)
        return NULL;
    return Py_BuildValue("(LLLLLLLN)", s.off, s.scanned, s.rewritten, s.prev_index, s.prev_term,
                         s.prev_chain, s.begin_index, reason);
}

/* ---------------------------------------------------------------- encode_entries, decode_entries
 * The PUSH entry codec of ledger/codec.py without a per-entry Python loop: the leader turns the
 * entries it pushes back into their stored bytes, once per follower per push, and the follower
 * parses and checks them. codec._encode_entries_py and codec._decode_entries_py are the
 * references (tests/ledger/test_codec_speedups.py compares them). The layout is entry_format's.
 *
 * encode_entries takes the common case only (a list or tuple of Entry tuples whose fields are
 * plain ints in their fields' ranges and whose bodies are bytes) and returns None for anything
 * else, before writing anything, so the reference raises its own TypeError or struct.error, or
 * takes the odd input its own way. decode_entries returns an error message rather than raising:
 * the caller raises ProtocolError with it, so exception types stay in Python. */

/* One Entry's header fields, checked against the widths ENTRY_HEADER (">iiqqqiIIi") packs. */
struct pushed {
    const char *body;
    long long index, term, pos, magic, size, channel, chain, body_crc, body_len;
};

/* Reads ``item`` into ``e``: 1 if it is a plain Entry encode_entries can take, else 0. Runs no
 * Python code, so two calls on the same item agree. */
static int
read_pushed(PyObject *item, struct pushed *e)
{
    if (Py_TYPE(item) != (PyTypeObject *)Entry || PyTuple_GET_SIZE(item) != 9)
        return 0;
    PyObject *body = PyTuple_GET_ITEM(item, 5), *entry_type = PyTuple_GET_ITEM(item, 6);
    /* int(entry_type) of an int subclass could run its __int__: only members and exact ints. */
    if (!PyBytes_CheckExact(body) ||
        !(Py_IS_TYPE(entry_type, (PyTypeObject *)EntryType) || PyLong_CheckExact(entry_type)))
        return 0;
    int overflow;
    e->magic = PyLong_AsLongLongAndOverflow(entry_type, &overflow);
    if (overflow || e->magic < INT32_MIN || e->magic > INT32_MAX)
        return 0;
    e->body = PyBytes_AS_STRING(body);
    e->body_len = PyBytes_GET_SIZE(body);
    return e->body_len <= INT32_MAX &&
           plain_int(PyTuple_GET_ITEM(item, 0), LLONG_MIN, LLONG_MAX, &e->index) &&
           plain_int(PyTuple_GET_ITEM(item, 1), LLONG_MIN, LLONG_MAX, &e->term) &&
           plain_int(PyTuple_GET_ITEM(item, 2), LLONG_MIN, LLONG_MAX, &e->pos) &&
           plain_int(PyTuple_GET_ITEM(item, 3), INT32_MIN, INT32_MAX, &e->size) &&
           plain_int(PyTuple_GET_ITEM(item, 4), INT32_MIN, INT32_MAX, &e->channel) &&
           plain_int(PyTuple_GET_ITEM(item, 7), 0, UINT32_MAX, &e->body_crc) &&
           plain_int(PyTuple_GET_ITEM(item, 8), 0, UINT32_MAX, &e->chain);
}

PyDoc_STRVAR(encode_entries_doc,
"encode_entries(entries, /)\n--\n\n"
"The stored bytes of entries (a list or tuple of Entry), back to back, as\n"
"codec._encode_entries_py encodes them; None when they are anything else (the caller then runs\n"
"the reference, which raises its error or takes them its own way).");

static PyObject *
encode_entries(PyObject *Py_UNUSED(module), PyObject *entries)
{
    /* Not any iterable: a generator consumed here would reach the reference empty. */
    if (!PyList_CheckExact(entries) && !PyTuple_CheckExact(entries))
        Py_RETURN_NONE;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(entries);
    struct pushed e;
    /* Pass 1: check every entry and size the output, so that it is allocated once. */
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!read_pushed(PySequence_Fast_GET_ITEM(entries, i), &e))
            Py_RETURN_NONE;
        if (total > PY_SSIZE_T_MAX - HEADER_SIZE - e.body_len)
            return PyErr_NoMemory();
        total += HEADER_SIZE + e.body_len;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL)
        return NULL;
    /* Pass 2. No Python code ran since pass 1 (a bytes object is not one the garbage collector
     * tracks, so allocating it starts no collection and no finalizer), so every entry reads as
     * it did; the checks stay, so that even if one did not, nothing is written out of bounds. */
    char *p = PyBytes_AS_STRING(out), *end = p + total;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i >= PySequence_Fast_GET_SIZE(entries) ||
            !read_pushed(PySequence_Fast_GET_ITEM(entries, i), &e) ||
            HEADER_SIZE + e.body_len > end - p) {
            Py_DECREF(out);
            return PyErr_Format(PyExc_RuntimeError, "entries changed while being encoded");
        }
        put_header36(p, (int32_t)e.magic, (int32_t)e.size, e.index, e.term, e.pos,
                     (int32_t)e.channel);
        put_tail_and_body(p, (uint32_t)e.chain, (uint32_t)e.body_crc, e.body, e.body_len);
        p += HEADER_SIZE + e.body_len;
    }
    return out;
}

/* Why decode_run stopped before the end. */
enum decode_stop {
    DECODE_OK,
    DECODE_NO_MEMORY, /* a Python error is set */
    DECODE_TRUNCATED,
    DECODE_HEADER,
    DECODE_BODY_CRC,
    DECODE_TRAILING,
};

/* Entries from buf[*pos..len) into ``entries`` (a list of ``count`` NULL slots), each header and
 * body CRC checked as codec._decode_entries_py checks them. Every read is bounds-checked against
 * ``len`` before it is made, with sums in long long (len and *pos are below 2**62 and a header
 * field is at most 2**32), so no input can make it read outside the buffer. On a bad entry,
 * *pos is where its header starts and *bad_index its index. */
static enum decode_stop
decode_run(const unsigned char *buf, long long len, long long *pos, Py_ssize_t count,
           PyTypeObject *entry_class, PyObject *entry_types, PyObject *entries,
           long long *bad_index)
{
    Py_ssize_t type_count = PyTuple_GET_SIZE(entry_types);
    PyObject *size_obj = NULL; /* batches often repeat a size: share its int */
    long long last_size = -1;
    enum decode_stop stop = DECODE_OK;
    for (Py_ssize_t i = 0; i < count; i++) {
        long long at = *pos;
        if (len - at < HEADER_SIZE) {
            stop = DECODE_TRUNCATED;
            break;
        }
        const unsigned char *h = buf + at;
        int32_t magic = (int32_t)get32(h), size = (int32_t)get32(h + 4),
                body_len = (int32_t)get32(h + 44);
        long long index = (long long)get64(h + 8), term = (long long)get64(h + 16),
                  epos = (long long)get64(h + 24);
        int32_t channel = (int32_t)get32(h + 32);
        uint32_t chain = get32(h + 36), crc = get32(h + 40);
        PyObject *entry_type =
            magic >= 0 && magic < type_count ? PyTuple_GET_ITEM(entry_types, magic) : Py_None;
        if (entry_type == Py_None || body_len < 0 ||
            (long long)size != HEADER_SIZE + (long long)body_len || size > len - at ||
            index < 0 || term < 0 || epos < 0) {
            stop = DECODE_HEADER;
            break;
        }
        const unsigned char *body = h + HEADER_SIZE;
        if (crc32c(0, body, (size_t)body_len) != crc) {
            *bad_index = index;
            stop = DECODE_BODY_CRC;
            break;
        }
        if (size != last_size) {
            Py_XSETREF(size_obj, PyLong_FromLong(size));
            if (size_obj == NULL) {
                stop = DECODE_NO_MEMORY;
                break;
            }
            last_size = size;
        }
        PyObject *items[9] = {PyLong_FromLongLong(index),
                              PyLong_FromLongLong(term),
                              PyLong_FromLongLong(epos),
                              Py_NewRef(size_obj),
                              PyLong_FromLong(channel),
                              PyBytes_FromStringAndSize((const char *)body, body_len),
                              Py_NewRef(entry_type),
                              PyLong_FromUnsignedLong(crc),
                              PyLong_FromUnsignedLong(chain)};
        PyObject *entry = build_entry(entry_class, items);
        if (entry == NULL) {
            stop = DECODE_NO_MEMORY;
            break;
        }
        untrack_entry(entry); /* the follower's log keeps it */
        PyList_SET_ITEM(entries, i, entry);
        *pos = at + size;
    }
    Py_XDECREF(size_obj);
    if (stop == DECODE_OK && *pos != len)
        stop = DECODE_TRAILING;
    return stop;
}

PyDoc_STRVAR(decode_entries_doc,
"decode_entries(buf, pos, count, entry_class, entry_types, /)\n--\n\n"
"The count entries that fill buf from pos to its end exactly, as codec._decode_entries_py\n"
"decodes and checks them, each built as an entry_class tuple whose entry type is\n"
"entry_types[magic] (a tuple; None marks an unknown magic). Returns the list of entries, or a\n"
"message saying what is wrong with buf (the caller raises ProtocolError with it).");

static PyObject *
decode_entries(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    long long pos, count;
    if (nargs != 5)
        return PyErr_Format(PyExc_TypeError, "decode_entries takes 5 arguments, not %zd", nargs);
    PyTypeObject *entry_class = (PyTypeObject *)args[3];
    if (!PyType_Check(args[3]) || !PyType_IsSubtype(entry_class, &PyTuple_Type))
        return PyErr_Format(PyExc_TypeError, "entry_class must be a tuple subclass");
    if (!PyTuple_CheckExact(args[4]))
        return PyErr_Format(PyExc_TypeError, "entry_types must be a tuple");
    if (as_field(args[1], "pos", 0, MAX_POS, &pos) < 0 ||
        as_field(args[2], "count", 0, LLONG_MAX, &count) < 0)
        return NULL;
    Py_buffer buf;
    if (PyObject_GetBuffer(args[0], &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    /* Exported, the buffer cannot be resized or freed, whatever an allocation below runs (a
     * garbage collection can run finalizers). */
    PyObject *entries = NULL, *result = NULL;
    long long len = buf.len, bad_index = 0;
    if (len > MAX_POS) {
        PyErr_SetString(PyExc_OverflowError, "buffer too large");
        goto done;
    }
    if (pos > len || count > (len - pos) / HEADER_SIZE) {
        result = PyUnicode_FromFormat("%lld entries announced but only %lld bytes follow", count,
                                      len - pos);
        goto done;
    }
    if ((entries = PyList_New((Py_ssize_t)count)) == NULL)
        goto done;
    long long at = pos;
    switch (decode_run(buf.buf, len, &at, (Py_ssize_t)count, entry_class, args[4], entries,
                       &bad_index)) {
    case DECODE_OK:
        result = Py_NewRef(entries);
        break;
    case DECODE_NO_MEMORY:
        break;
    case DECODE_TRUNCATED:
        result = PyUnicode_FromFormat("truncated entry header at byte %lld of a push", at);
        break;
    case DECODE_HEADER:
        result = PyUnicode_FromFormat("malformed entry header at byte %lld of a push", at);
        break;
    case DECODE_BODY_CRC:
        result = PyUnicode_FromFormat("body CRC mismatch for entry %lld in a push", bad_index);
        break;
    case DECODE_TRAILING:
        result = PyUnicode_FromFormat("%lld bytes after the last entry of a push", len - at);
        break;
    }
done:
    Py_XDECREF(entries);
    PyBuffer_Release(&buf);
    return result;
}

/* ---------------------------------------------------------------- crc32c, the module */

PyDoc_STRVAR(crc32c_doc, "crc32c(data, value=0, portable=False, /)\n--\n\n"
                         "CRC-32C of data continuing value, as crc32c.crc32c computes it;\n"
                         "portable=True forces the table code (for tests).");

static PyObject *
py_crc32c(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer data;
    PyObject *value_obj = NULL;
    int portable = 0;
    long long value = 0;
    if (!PyArg_ParseTuple(args, "y*|Op:crc32c", &data, &value_obj, &portable))
        return NULL;
    PyObject *result = NULL;
    if (value_obj == NULL || as_field(value_obj, "value", 0, UINT32_MAX, &value) == 0)
        result = PyLong_FromUnsignedLong((portable ? crc32c_portable : crc32c)(
            (uint32_t)value, data.buf, (size_t)data.len));
    PyBuffer_Release(&data);
    return result;
}

static PyMethodDef methods[] = {
    {"plan_leader_append", (PyCFunction)(void (*)(void))plan_leader_append, METH_FASTCALL,
     plan_doc},
    {"plan_replicated_append", (PyCFunction)(void (*)(void))plan_replicated_append,
     METH_FASTCALL, replicated_doc},
    {"scan_entries", (PyCFunction)(void (*)(void))scan_entries, METH_FASTCALL, scan_doc},
    {"encode_entries", encode_entries, METH_O, encode_entries_doc},
    {"decode_entries", (PyCFunction)(void (*)(void))decode_entries, METH_FASTCALL,
     decode_entries_doc},
    {"crc32c", py_crc32c, METH_VARARGS, crc32c_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "ledgermq.store._speedups",
    "C versions of the store's hot loops; append_plan.py holds the reference code.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    int hardware = 0;
    crc_table_init();
#ifdef HAVE_SSE42_CRC
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) {
        crc_short_init();
        crc32c = crc32c_sse42;
        hardware = 1;
    }
#endif
    /* The errors live in the package's bottom layer, which the store depends on anyway. */
    PyObject *errors = PyImport_ImportModule("ledgermq.errors");
    if (errors == NULL)
        return NULL;
    Py_XSETREF(EntryTooLargeError, PyObject_GetAttrString(errors, "EntryTooLargeError"));
    Py_XSETREF(InconsistentLogError, PyObject_GetAttrString(errors, "InconsistentLogError"));
    Py_DECREF(errors);
    if (EntryTooLargeError == NULL || InconsistentLogError == NULL)
        return NULL;
    PyObject *entry_format = PyImport_ImportModule("ledgermq.store.entry_format");
    if (entry_format == NULL)
        return NULL;
    Py_XSETREF(EntryType, PyObject_GetAttrString(entry_format, "EntryType"));
    Py_XSETREF(Entry, PyObject_GetAttrString(entry_format, "Entry"));
    Py_DECREF(entry_format);
    if (EntryType == NULL || Entry == NULL)
        return NULL;
    if (!PyType_Check(EntryType) || !PyType_Check(Entry) ||
        !PyType_IsSubtype((PyTypeObject *)Entry, &PyTuple_Type))
        return PyErr_Format(PyExc_TypeError,
                            "entry_format.EntryType is not a class or Entry not a tuple class");
    PyObject *module = PyModule_Create(&module_def);
    if (module != NULL &&
        PyModule_AddObjectRef(module, "HARDWARE_CRC32C", hardware ? Py_True : Py_False) < 0)
        Py_CLEAR(module);
    return module;
}
