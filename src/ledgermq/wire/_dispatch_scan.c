/* The dispatcher's scan of a ledger entry's records, in C.
 *
 * ``scan_dispatch_records(buf, record_type, slow_record)`` is
 * ``message.scan_dispatch_records`` (whose pure-Python version, ``_scan_dispatch_records_py``,
 * is the reference): every replica runs it on every committed entry, and the Python loop with
 * its per-record substring searches and tuple building was 10-12 % of the master's CPU and a
 * third of a follower's.
 *
 * The C code reads only the common record, exactly as the Python fast path does: V1 magic, IPv4
 * hosts, lengths consistent with TOTALSIZE, topic and properties valid UTF-8 (as Python's strict
 * decoder takes it). Any other record, well-formed or not, goes to ``slow_record(buf, pos)``:
 * the Python path (``read_dispatch_info``), which returns the record's RecordIndexInfo or raises
 * the MessageFormatError the reference raises. So results and errors are the reference's by
 * construction, and tests/wire/test_message_fast_paths.py compares them on generated input.
 *
 * Semantics kept from the reference: a property's value is found as ``_find_property`` finds it
 * (the last ``\x02NAME\x01`` wins, else a leading ``NAME\x01``; the value runs to the next
 * ``\x02``); tags_code is Java's String.hashCode over UTF-16 code units (``tag_hash``), 0 for
 * absent or empty TAGS; KEYS is split as ``str.split()`` splits (any Unicode whitespace: ASCII
 * values here, others by PyUnicode_Split itself), then a non-empty UNIQ_KEY is appended.
 *
 * Returns None for a buffer that is not exactly bytes, bytearray or a 1-D contiguous memoryview
 * of unsigned bytes (a subclass could change what len() or indexing mean): the caller then runs
 * the reference on it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define HEAD_SIZE 88 /* TOTALSIZE .. BODYLENGTH of a V1 record with IPv4 hosts */
#define MIN_RECORD_BYTES 91
#define MAGIC_V1 ((int32_t)-626843481)
#define HOST_FLAGS (0x10 | 0x20) /* BORNHOST_V6, STOREHOST_V6 */
#define FIELDS 8                 /* RecordIndexInfo's fields */

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
 * surrogates, nothing past U+10FFFF). Pure ASCII is checked eight bytes at a time. */
static int
valid_utf8(const unsigned char *p, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        if (c < 0x80) {
            if (i + 8 <= n) {
                uint64_t word;
                memcpy(&word, p + i, 8);
                if (!(word & UINT64_C(0x8080808080808080))) {
                    i += 8;
                    continue;
                }
            }
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

/* A property's value in the properties text t[0:n] (valid UTF-8), as ``_find_property`` finds
 * it for the name m[1:mlen-1] of the mark m = "\x02NAME\x01": sets *start and *stop, returns
 * 0 when the property is absent. The separators are ASCII, so byte and character searches
 * agree. */
static int
find_property(const unsigned char *t, Py_ssize_t n, const char *m, Py_ssize_t mlen,
              Py_ssize_t *start, Py_ssize_t *stop)
{
    Py_ssize_t at = -1;
    for (Py_ssize_t i = n - mlen; i >= 0; i--) {
        if (t[i] == 0x02 && memcmp(t + i, m, (size_t)mlen) == 0) {
            at = i;
            break;
        }
    }
    if (at >= 0)
        *start = at + mlen;
    else if (n >= mlen - 1 && memcmp(t, m + 1, (size_t)(mlen - 1)) == 0)
        *start = mlen - 1;
    else
        return 0;
    const unsigned char *sep = memchr(t + *start, 0x02, (size_t)(n - *start));
    *stop = sep != NULL ? sep - t : n;
    return 1;
}

/* ``tag_hash``: Java's String.hashCode of valid UTF-8 p[0:n], over UTF-16 code units (a code
 * point past the BMP counts as its two surrogates), as a signed int32. */
static int32_t
java_hash(const unsigned char *p, Py_ssize_t n)
{
    uint32_t h = 0;
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        uint32_t code;
        if (c < 0x80) {
            code = c;
            i += 1;
        }
        else if (c < 0xE0) {
            code = (uint32_t)(c & 0x1F) << 6 | (p[i + 1] & 0x3F);
            i += 2;
        }
        else if (c < 0xF0) {
            code = (uint32_t)(c & 0x0F) << 12 | (uint32_t)(p[i + 1] & 0x3F) << 6 | (p[i + 2] & 0x3F);
            i += 3;
        }
        else {
            code = (uint32_t)(c & 0x07) << 18 | (uint32_t)(p[i + 1] & 0x3F) << 12 |
                   (uint32_t)(p[i + 2] & 0x3F) << 6 | (p[i + 3] & 0x3F);
            i += 4;
        }
        if (code < 0x10000)
            h = h * 31 + code;
        else {
            code -= 0x10000;
            h = h * 31 + (0xD800 | code >> 10);
            h = h * 31 + (0xDC00 | (code & 0x3FF));
        }
    }
    return (int32_t)h;
}

/* Python's whitespace among ASCII characters (what ``str.split()`` splits on). */
static inline int
ascii_space(unsigned char c)
{
    return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
}

/* ``value.split()`` of valid UTF-8 p[0:n], as a new list; NULL with an exception set. */
static PyObject *
split_keys(const unsigned char *p, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (p[i] >= 0x80) { /* non-ASCII: Unicode whitespace too, which str.split() knows */
            PyObject *text = PyUnicode_DecodeUTF8((const char *)p, n, "strict");
            if (text == NULL)
                return NULL;
            PyObject *parts = PyUnicode_Split(text, NULL, -1);
            Py_DECREF(text);
            return parts;
        }
    }
    PyObject *keys = PyList_New(0);
    if (keys == NULL)
        return NULL;
    Py_ssize_t i = 0;
    while (i < n) {
        while (i < n && ascii_space(p[i]))
            i++;
        if (i == n)
            break;
        Py_ssize_t start = i;
        while (i < n && !ascii_space(p[i]))
            i++;
        PyObject *key = PyUnicode_DecodeASCII((const char *)p + start, i - start, "strict");
        if (key == NULL || PyList_Append(keys, key) < 0) {
            Py_XDECREF(key);
            Py_DECREF(keys);
            return NULL;
        }
        Py_DECREF(key);
    }
    return keys;
}

static const char TAGS_MARK[] = "\x02TAGS\x01";
static const char KEYS_MARK[] = "\x02KEYS\x01";
static const char UNIQ_MARK[] = "\x02UNIQ_KEY\x01";
#define MARK_LEN(m) ((Py_ssize_t)sizeof(m) - 1)

/* A RecordIndexInfo (a tuple subclass) of the FIELDS new references in items (stolen, also on
 * failure), built as tuple.__new__(cls, items) builds it. */
static PyObject *
new_record(PyTypeObject *type, PyObject **items)
{
    PyObject *record = type->tp_alloc(type, FIELDS);
    if (record == NULL) {
        for (int i = 0; i < FIELDS; i++)
            Py_XDECREF(items[i]);
        return NULL;
    }
    for (int i = 0; i < FIELDS; i++)
        PyTuple_SET_ITEM(record, i, items[i]);
    return record;
}

/* The RecordIndexInfo of the fast-path record at data[pos:record_end] (its topic is
 * data[body_end + 1:topic_end], its properties the rest), or NULL with an exception set.
 * *topic caches the last topic object made (its bytes at *topic_at, *topic_len long). */
static PyObject *
fast_record(PyTypeObject *type, const unsigned char *data, Py_ssize_t pos, int32_t total,
            int32_t queue_id, int64_t queue_offset, int64_t store_ts, Py_ssize_t body_end,
            Py_ssize_t topic_end, PyObject **topic, const unsigned char **topic_at,
            Py_ssize_t *topic_len)
{
    const unsigned char *topic_bytes = data + body_end + 1;
    Py_ssize_t topic_n = topic_end - body_end - 1;
    if (*topic == NULL || *topic_len != topic_n ||
        memcmp(*topic_at, topic_bytes, (size_t)topic_n) != 0) {
        PyObject *made = PyUnicode_DecodeUTF8((const char *)topic_bytes, topic_n, "strict");
        if (made == NULL)
            return NULL;
        Py_XSETREF(*topic, made);
        *topic_at = topic_bytes;
        *topic_len = topic_n;
    }
    const unsigned char *text = data + topic_end + 2;
    Py_ssize_t n = (Py_ssize_t)(total - (topic_end + 2 - pos));
    int32_t tags_code = 0;
    PyObject *keys = NULL;
    Py_ssize_t start, stop;
    if (n > 0 && find_property(text, n, TAGS_MARK, MARK_LEN(TAGS_MARK), &start, &stop) &&
        stop > start)
        tags_code = java_hash(text + start, stop - start);
    if (n > 0 && find_property(text, n, KEYS_MARK, MARK_LEN(KEYS_MARK), &start, &stop) &&
        stop > start)
        keys = split_keys(text + start, stop - start);
    else
        keys = PyList_New(0);
    if (keys == NULL)
        return NULL;
    if (n > 0 && find_property(text, n, UNIQ_MARK, MARK_LEN(UNIQ_MARK), &start, &stop) &&
        stop > start) {
        PyObject *uniq =
            PyUnicode_DecodeUTF8((const char *)text + start, stop - start, "strict");
        if (uniq == NULL || PyList_Append(keys, uniq) < 0) {
            Py_XDECREF(uniq);
            Py_DECREF(keys);
            return NULL;
        }
        Py_DECREF(uniq);
    }
    PyObject *items[FIELDS] = {
        PyLong_FromSsize_t(pos),
        PyLong_FromLong(total),
        Py_NewRef(*topic),
        PyLong_FromLong(queue_id),
        PyLong_FromLongLong(queue_offset),
        PyLong_FromLongLong(store_ts),
        PyLong_FromLong(tags_code),
        keys,
    };
    for (int i = 0; i < FIELDS; i++) {
        if (items[i] == NULL) {
            for (int j = 0; j < FIELDS; j++)
                Py_XDECREF(items[j]);
            return NULL;
        }
    }
    return new_record(type, items);
}

/* The record at pos by the Python path: slow_record(buf, pos), checked to be a RecordIndexInfo
 * with a positive total size, which it stores in *total. */
static PyObject *
slow_record(PyObject *slow, PyObject *buf, PyTypeObject *type, Py_ssize_t pos, int64_t *total)
{
    PyObject *where = PyLong_FromSsize_t(pos);
    if (where == NULL)
        return NULL;
    PyObject *record = PyObject_CallFunctionObjArgs(slow, buf, where, NULL);
    Py_DECREF(where);
    if (record == NULL)
        return NULL;
    if (Py_TYPE(record) != type || PyTuple_GET_SIZE(record) != FIELDS) {
        PyErr_Format(PyExc_TypeError, "slow_record returned %.100s, not a RecordIndexInfo",
                     Py_TYPE(record)->tp_name);
        Py_DECREF(record);
        return NULL;
    }
    long long size = PyLong_AsLongLong(PyTuple_GET_ITEM(record, 1));
    if (size == -1 && PyErr_Occurred()) {
        Py_DECREF(record);
        return NULL;
    }
    if (size <= 0) {
        PyErr_Format(PyExc_ValueError, "slow_record returned a record of %lld bytes", size);
        Py_DECREF(record);
        return NULL;
    }
    *total = size;
    return record;
}

/* Whether view (of a memoryview) reads as the reference reads a bytes object: one dimension,
 * contiguous, unsigned bytes (len() and indexing agree with the bytes). */
static int
plain_bytes_view(const Py_buffer *view)
{
    return view->ndim == 1 && view->itemsize == 1 &&
           (view->format == NULL || strcmp(view->format, "B") == 0) &&
           (view->strides == NULL || view->strides[0] == 1) && view->suboffsets == NULL;
}

static PyObject *
scan_dispatch_records(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError,
                     "scan_dispatch_records expects 3 arguments (buf, record_type, "
                     "slow_record), got %zd",
                     nargs);
        return NULL;
    }
    PyObject *buf = args[0];
    if (!PyType_Check(args[1]) || !PyType_IsSubtype((PyTypeObject *)args[1], &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "record_type must be a tuple subclass");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)args[1];
    PyObject *slow = args[2];
    Py_buffer view;
    if (PyBytes_CheckExact(buf) || PyByteArray_CheckExact(buf)) {
        if (PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE) < 0)
            return NULL;
    }
    else if (Py_IS_TYPE(buf, &PyMemoryView_Type)) {
        if (PyObject_GetBuffer(buf, &view, PyBUF_FULL_RO) < 0) {
            PyErr_Clear(); /* released or not contiguous: the reference says what it makes of it */
            Py_RETURN_NONE;
        }
        if (!plain_bytes_view(&view)) {
            PyBuffer_Release(&view);
            Py_RETURN_NONE;
        }
    }
    else
        Py_RETURN_NONE;

    const unsigned char *data = view.buf;
    const Py_ssize_t end = view.len;
    PyObject *out = PyList_New(0);
    PyObject *topic = NULL;
    const unsigned char *topic_at = NULL;
    Py_ssize_t topic_len = 0;
    if (out == NULL)
        goto fail;
    Py_ssize_t pos = 0;
    do { /* an empty buffer too: the Python path refuses it */
        PyObject *record = NULL;
        if (end - pos >= HEAD_SIZE) {
            const unsigned char *p = data + pos;
            int32_t total = be32(p);
            int32_t magic = be32(p + 4);
            int32_t sys_flag = be32(p + 36);
            int32_t body_length = be32(p + 84);
            int64_t record_end = (int64_t)pos + total;
            int64_t body_end = (int64_t)pos + HEAD_SIZE + body_length;
            if (magic == MAGIC_V1 && !(sys_flag & HOST_FLAGS) && total >= MIN_RECORD_BYTES &&
                body_length >= 0 && body_end + 3 <= record_end && record_end <= end) {
                int64_t topic_end = body_end + 1 + data[body_end];
                if (topic_end + 2 <= record_end &&
                    topic_end + 2 + (data[topic_end] << 8 | data[topic_end + 1]) == record_end &&
                    valid_utf8(data + body_end + 1, (Py_ssize_t)(topic_end - body_end - 1)) &&
                    valid_utf8(data + topic_end + 2, (Py_ssize_t)(record_end - topic_end - 2))) {
                    record = fast_record(type, data, pos, total, be32(p + 12), be64(p + 20),
                                         be64(p + 56), (Py_ssize_t)body_end,
                                         (Py_ssize_t)topic_end, &topic, &topic_at, &topic_len);
                    if (record == NULL)
                        goto fail;
                    if (PyList_Append(out, record) < 0) {
                        Py_DECREF(record);
                        goto fail;
                    }
                    Py_DECREF(record);
                    pos = (Py_ssize_t)record_end;
                    continue;
                }
            }
        }
        int64_t size;
        record = slow_record(slow, buf, type, pos, &size);
        if (record == NULL)
            goto fail;
        if (PyList_Append(out, record) < 0) {
            Py_DECREF(record);
            goto fail;
        }
        Py_DECREF(record);
        pos += (Py_ssize_t)size;
    } while (pos < end);
    Py_XDECREF(topic);
    PyBuffer_Release(&view);
    return out;
fail:
    Py_XDECREF(topic);
    Py_XDECREF(out);
    PyBuffer_Release(&view);
    return NULL;
}

PyDoc_STRVAR(scan_dispatch_records_doc,
             "scan_dispatch_records(buf, record_type, slow_record, /)\n--\n\n"
             "``message.scan_dispatch_records(buf)``: a list of ``record_type`` (RecordIndexInfo) "
             "for the records of ``buf``; records off the fast path go to "
             "``slow_record(buf, pos)``. None when ``buf`` is not bytes, bytearray or a plain "
             "memoryview of bytes (run the reference on it).");

static PyMethodDef methods[] = {
    {"scan_dispatch_records", (PyCFunction)(void (*)(void))scan_dispatch_records,
     METH_FASTCALL, scan_dispatch_records_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "ledgermq.wire._dispatch_scan",
    "The dispatcher's record scan; ledgermq/wire/message.py holds the reference.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__dispatch_scan(void)
{
    return PyModule_Create(&module_def);
}
