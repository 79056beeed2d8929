/* A PULL response's records as Arrow column buffers, for the Spark connector's read path.
 *
 * ``record_columns(data)`` walks concatenated message records (the layout of
 * ledgermq/wire/message.py) and fills the buffers of the connector's row schema directly: no
 * Python object per message. Decoding each record into a MessageExt and then into column lists
 * cost the reader ~13 us per message; this costs well under one.
 *
 * It takes only what ``message.decode_records`` reads on its own fast path: V1 records with
 * IPv4 hosts and plain (uncompressed) bodies whose topic and properties are valid UTF-8, at
 * most MAX_PAIRS properties each. For anything else it returns None and the caller decodes with
 * ``decode_records`` (which reads every layout or says precisely what is wrong). The reference
 * is that Python path: ledgermq/spark/arrow_rows.py builds the same rows from MessageExt, and
 * tests/spark/test_arrow_rows.py compares the two on generated records.
 *
 * Semantics kept from the reference: properties split on \x02, a pair's name runs to its first
 * \x01, pairs without a name or without \x01 are skipped, a later pair with the same name wins
 * but keeps the first one's position (``decode_properties``); msgId is UNIQ_KEY when it is set
 * and not empty, else the offset msgId (hex of store host, port and physical offset); KEYS and
 * TAGS are their own columns; UNIQ_KEY, KEYS, TAGS and WAIT stay out of the properties map.
 * Timestamps are microseconds (Spark's TIMESTAMP), so a millisecond stamp past int64 / 1000
 * is left to the reference too.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define HEAD_SIZE 88 /* TOTALSIZE .. BODYLENGTH of a V1 record with IPv4 hosts */
#define MAGIC_V1 ((int32_t)-626843481)
#define SLOW_FLAGS (0x1 | 0x10 | 0x20) /* COMPRESSED, BORNHOST_V6, STOREHOST_V6 */
#define MAX_PAIRS 256                  /* more properties than this: the reference path */

static inline int32_t
be32(const unsigned char *p)
{
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

static inline int64_t
be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return (int64_t)v;
}

/* Whether p[0:n] is UTF-8 as Python's strict decoder takes it (no overlong forms, no
 * surrogates, nothing past U+10FFFF). */
static int
valid_utf8(const unsigned char *p, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (p[i + 1] & 0xC0) != 0x80)
                return 0;
            i += 2;
        }
        else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n || (p[i + 1] & 0xC0) != 0x80 || (p[i + 2] & 0xC0) != 0x80)
                return 0;
            if (c == 0xE0 && p[i + 1] < 0xA0)
                return 0; /* overlong */
            if (c == 0xED && p[i + 1] >= 0xA0)
                return 0; /* surrogate */
            i += 3;
        }
        else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n || (p[i + 1] & 0xC0) != 0x80 || (p[i + 2] & 0xC0) != 0x80 ||
                (p[i + 3] & 0xC0) != 0x80)
                return 0;
            if (c == 0xF0 && p[i + 1] < 0x90)
                return 0; /* overlong */
            if (c == 0xF4 && p[i + 1] >= 0x90)
                return 0; /* past U+10FFFF */
            i += 4;
        }
        else
            return 0;
    }
    return 1;
}

/* One output buffer: a bytes object written front to back, trimmed to its length at the end. */
typedef struct {
    PyObject *bytes;
    char *p;
    Py_ssize_t len;
} Out;

static int
out_new(Out *o, Py_ssize_t capacity)
{
    o->bytes = PyBytes_FromStringAndSize(NULL, capacity > 0 ? capacity : 0);
    o->p = o->bytes ? PyBytes_AS_STRING(o->bytes) : NULL;
    o->len = 0;
    return o->bytes != NULL;
}

static inline void
out_put(Out *o, const void *src, Py_ssize_t n)
{
    memcpy(o->p + o->len, src, (size_t)n);
    o->len += n;
}

static inline void
out_i32(Out *o, int32_t v)
{
    out_put(o, &v, 4);
}

static inline void
out_i64(Out *o, int64_t v)
{
    out_put(o, &v, 8);
}

typedef struct {
    const unsigned char *name, *value;
    Py_ssize_t name_len, value_len;
} Pair;

static int
is_name(const Pair *pair, const char *name, Py_ssize_t len)
{
    return pair->name_len == len && memcmp(pair->name, name, (size_t)len) == 0;
}

/* Output slots, in the order record_columns returns them. */
enum {
    TOPIC_OFF, TOPIC_DATA, QUEUE_ID, QUEUE_OFFSET, MSGID_OFF, MSGID_DATA,
    KEYS_VALID, KEYS_OFF, KEYS_DATA, TAGS_VALID, TAGS_OFF, TAGS_DATA,
    BODY_OFF, BODY_DATA, PROP_OFF, PROP_NAME_OFF, PROP_NAME_DATA, PROP_VALUE_OFF,
    PROP_VALUE_DATA, BORN, STORE, RECONSUME, N_OUT
};

static const char HEX[] = "0123456789ABCDEF";

static PyObject *
record_columns(PyObject *module, PyObject *arg)
{
    (void)module;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    (void)arg;
    Py_RETURN_NONE; /* Arrow buffers are little-endian; the reference path works everywhere */
#else
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *data = view.buf;
    const Py_ssize_t end = view.len;
    Out out[N_OUT];
    Pair *pairs = NULL;
    int made = 0;
    PyObject *result = NULL;

    /* Pass 1: every record on the fast path? Count them and size the buffers. */
    Py_ssize_t n = 0, topic_bytes = 0, body_bytes = 0, prop_bytes = 0, max_pairs = 0;
    for (Py_ssize_t pos = 0; pos < end;) {
        if (end - pos < HEAD_SIZE)
            goto reference;
        const unsigned char *r = data + pos;
        int32_t total = be32(r), sys_flag = be32(r + 36), body_len = be32(r + 84);
        if (be32(r + 4) != MAGIC_V1 || (sys_flag & SLOW_FLAGS) || body_len < 0)
            goto reference;
        Py_ssize_t record_end = pos + (Py_ssize_t)total;
        Py_ssize_t body_end = pos + HEAD_SIZE + (Py_ssize_t)body_len;
        if (!(body_end + 3 <= record_end && record_end <= end))
            goto reference;
        Py_ssize_t topic_end = body_end + 1 + data[body_end];
        if (topic_end + 2 > record_end)
            goto reference;
        Py_ssize_t props_len = (Py_ssize_t)(data[topic_end] << 8 | data[topic_end + 1]);
        if (topic_end + 2 + props_len != record_end)
            goto reference;
        int64_t born = be64(r + 40), store = be64(r + 56);
        if (born > INT64_MAX / 1000 || born < INT64_MIN / 1000 || store > INT64_MAX / 1000 ||
            store < INT64_MIN / 1000)
            goto reference;
        if (!valid_utf8(data + body_end + 1, topic_end - body_end - 1) ||
            !valid_utf8(data + topic_end + 2, props_len))
            goto reference;
        n++;
        topic_bytes += topic_end - body_end - 1;
        body_bytes += body_len;
        prop_bytes += props_len;
        max_pairs += props_len / 2 + 1;
        pos = record_end;
    }
    /* Arrow's offsets here are int32. A pull is a few MiB at most; past that, the reference. */
    if (body_bytes > INT32_MAX || prop_bytes + 32 * n > INT32_MAX || max_pairs > INT32_MAX)
        goto reference;

    const Py_ssize_t bitmap = (n + 7) / 8, offsets = 4 * (n + 1);
    const Py_ssize_t sizes[N_OUT] = {
        [TOPIC_OFF] = offsets, [TOPIC_DATA] = topic_bytes, [QUEUE_ID] = 4 * n,
        [QUEUE_OFFSET] = 8 * n, [MSGID_OFF] = offsets, [MSGID_DATA] = prop_bytes + 32 * n,
        [KEYS_VALID] = bitmap, [KEYS_OFF] = offsets, [KEYS_DATA] = prop_bytes,
        [TAGS_VALID] = bitmap, [TAGS_OFF] = offsets, [TAGS_DATA] = prop_bytes,
        [BODY_OFF] = offsets, [BODY_DATA] = body_bytes, [PROP_OFF] = offsets,
        [PROP_NAME_OFF] = 4 * (max_pairs + 1), [PROP_NAME_DATA] = prop_bytes,
        [PROP_VALUE_OFF] = 4 * (max_pairs + 1), [PROP_VALUE_DATA] = prop_bytes,
        [BORN] = 8 * n, [STORE] = 8 * n, [RECONSUME] = 4 * n,
    };
    for (; made < N_OUT; made++)
        if (!out_new(&out[made], sizes[made]))
            goto error;
    memset(out[KEYS_VALID].p, 0, (size_t)bitmap); /* bits set row by row below */
    memset(out[TAGS_VALID].p, 0, (size_t)bitmap);
    out[KEYS_VALID].len = out[TAGS_VALID].len = bitmap;
    pairs = PyMem_Malloc(sizeof(Pair) * MAX_PAIRS);
    if (pairs == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    out_i32(&out[TOPIC_OFF], 0);
    out_i32(&out[MSGID_OFF], 0);
    out_i32(&out[KEYS_OFF], 0);
    out_i32(&out[TAGS_OFF], 0);
    out_i32(&out[BODY_OFF], 0);
    out_i32(&out[PROP_OFF], 0);
    out_i32(&out[PROP_NAME_OFF], 0);
    out_i32(&out[PROP_VALUE_OFF], 0);

    /* Pass 2: fill. Nothing below can fail except too many properties (the reference). */
    int32_t map_entries = 0;
    Py_ssize_t row = 0;
    for (Py_ssize_t pos = 0; pos < end; row++) {
        const unsigned char *r = data + pos;
        Py_ssize_t record_end = pos + (Py_ssize_t)be32(r);
        Py_ssize_t body_end = pos + HEAD_SIZE + (Py_ssize_t)be32(r + 84);
        Py_ssize_t topic_end = body_end + 1 + data[body_end];
        const unsigned char *props = data + topic_end + 2;
        const unsigned char *props_end = data + record_end;

        int n_pairs = 0;
        for (const unsigned char *seg = props; seg < props_end;) {
            const unsigned char *seg_end = memchr(seg, 0x02, (size_t)(props_end - seg));
            if (seg_end == NULL)
                seg_end = props_end;
            const unsigned char *sep = memchr(seg, 0x01, (size_t)(seg_end - seg));
            if (sep != NULL && sep > seg) {
                Pair pair = {seg, sep + 1, sep - seg, seg_end - sep - 1};
                int i = 0;
                for (; i < n_pairs; i++)
                    if (pairs[i].name_len == pair.name_len &&
                        memcmp(pairs[i].name, pair.name, (size_t)pair.name_len) == 0)
                        break;
                if (i < n_pairs)
                    pairs[i] = pair; /* a later pair wins, in the first one's place */
                else if (n_pairs == MAX_PAIRS)
                    goto reference;
                else
                    pairs[n_pairs++] = pair;
            }
            seg = seg_end + 1;
        }

        const Pair *keys = NULL, *tags = NULL, *uniq = NULL;
        for (int i = 0; i < n_pairs; i++) {
            const Pair *pair = &pairs[i];
            if (is_name(pair, "KEYS", 4))
                keys = pair;
            else if (is_name(pair, "TAGS", 4))
                tags = pair;
            else if (is_name(pair, "UNIQ_KEY", 8))
                uniq = pair;
            else if (!is_name(pair, "WAIT", 4)) {
                out_put(&out[PROP_NAME_DATA], pair->name, pair->name_len);
                out_i32(&out[PROP_NAME_OFF], (int32_t)out[PROP_NAME_DATA].len);
                out_put(&out[PROP_VALUE_DATA], pair->value, pair->value_len);
                out_i32(&out[PROP_VALUE_OFF], (int32_t)out[PROP_VALUE_DATA].len);
                map_entries++;
            }
        }
        out_i32(&out[PROP_OFF], map_entries);
        if (keys != NULL) {
            out[KEYS_VALID].p[row >> 3] |= (char)(1 << (row & 7));
            out_put(&out[KEYS_DATA], keys->value, keys->value_len);
        }
        out_i32(&out[KEYS_OFF], (int32_t)out[KEYS_DATA].len);
        if (tags != NULL) {
            out[TAGS_VALID].p[row >> 3] |= (char)(1 << (row & 7));
            out_put(&out[TAGS_DATA], tags->value, tags->value_len);
        }
        out_i32(&out[TAGS_OFF], (int32_t)out[TAGS_DATA].len);
        if (uniq != NULL && uniq->value_len > 0)
            out_put(&out[MSGID_DATA], uniq->value, uniq->value_len);
        else {
            /* The offset msgId: store host (4) + port (4) + physical offset (8), upper hex. */
            char hex[32];
            const unsigned char *parts[2] = {r + 64, r + 28};
            for (int part = 0, k = 0; part < 2; part++)
                for (int i = 0; i < 8; i++) {
                    hex[k++] = HEX[parts[part][i] >> 4];
                    hex[k++] = HEX[parts[part][i] & 15];
                }
            out_put(&out[MSGID_DATA], hex, 32);
        }
        out_i32(&out[MSGID_OFF], (int32_t)out[MSGID_DATA].len);

        out_put(&out[TOPIC_DATA], data + body_end + 1, topic_end - body_end - 1);
        out_i32(&out[TOPIC_OFF], (int32_t)out[TOPIC_DATA].len);
        out_put(&out[BODY_DATA], r + HEAD_SIZE, body_end - pos - HEAD_SIZE);
        out_i32(&out[BODY_OFF], (int32_t)out[BODY_DATA].len);
        out_i32(&out[QUEUE_ID], be32(r + 12));
        out_i64(&out[QUEUE_OFFSET], be64(r + 20));
        out_i64(&out[BORN], be64(r + 40) * 1000);
        out_i64(&out[STORE], be64(r + 56) * 1000);
        out_i32(&out[RECONSUME], be32(r + 72));
        pos = record_end;
    }

    for (int i = 0; i < N_OUT; i++)
        if (out[i].len != PyBytes_GET_SIZE(out[i].bytes) &&
            _PyBytes_Resize(&out[i].bytes, out[i].len) < 0) {
            /* _PyBytes_Resize freed it on failure; the rest are released below */
            for (int j = i + 1; j < N_OUT; j++)
                Py_DECREF(out[j].bytes);
            for (int j = 0; j < i; j++)
                Py_DECREF(out[j].bytes);
            made = 0;
            goto error;
        }
    result = PyTuple_New(N_OUT + 1);
    if (result == NULL) {
        for (int i = 0; i < N_OUT; i++)
            Py_DECREF(out[i].bytes);
        made = 0;
        goto error;
    }
    PyTuple_SET_ITEM(result, 0, PyLong_FromSsize_t(n));
    if (PyTuple_GET_ITEM(result, 0) == NULL) {
        for (int i = 0; i < N_OUT; i++)
            Py_DECREF(out[i].bytes);
        Py_CLEAR(result);
        made = 0;
        goto error;
    }
    for (int i = 0; i < N_OUT; i++)
        PyTuple_SET_ITEM(result, i + 1, out[i].bytes);
    PyMem_Free(pairs);
    PyBuffer_Release(&view);
    return result;

reference:
    result = Py_None;
    Py_INCREF(result);
error:
    for (int i = 0; i < made; i++)
        Py_DECREF(out[i].bytes);
    PyMem_Free(pairs);
    PyBuffer_Release(&view);
    return result;
#endif
}

PyDoc_STRVAR(record_columns_doc,
             "record_columns(data, /)\n--\n\n"
             "The Arrow buffers of the connector's rows for the records in ``data``: a tuple of "
             "the row count and 22 bytes objects (see _record_columns.pyi), or None when a "
             "record is not on the fast path (decode it with message.decode_records).");

static PyMethodDef methods[] = {
    {"record_columns", record_columns, METH_O, record_columns_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "ledgermq.wire._record_columns",
    "Message records to Arrow column buffers; ledgermq/spark/arrow_rows.py holds the reference.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__record_columns(void)
{
    return PyModule_Create(&module_def);
}
