/* Message records -> MessageExt tuples: the fast path of ledgermq.wire.message.decode_records.
 *
 * Why C: a consumer decodes every message it receives, and the Python loop (struct unpack,
 * two UTF-8 decodes, a properties dict built by split/partition, a 16-field tuple) cost about
 * 2.3 us per 1 KiB message (C: 0.56, idle machine, 2026-11-25); a pull of 256 messages spent
 * most of its client CPU here.
 *
 * decode_plain(data, pos, message_type) decodes consecutive records of `data` from `pos` while
 * each one takes the common path (V1 magic, IPv4 hosts, uncompressed body, UTF-8 topic and
 * properties, lengths consistent) and returns (messages, stop): `stop` is where it stopped, the
 * end of `data` or the first record it leaves to the Python code (`_decode_one`), which decodes
 * or refuses it exactly as the reference does. It never raises for bad input; the checks are
 * those of the Python fast path in decode_records, which stays the reference (tested equal with
 * hypothesis in tests/wire/test_record_decode.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define HEAD_SIZE 88
#define MAGIC_V1 (-626843481)
#define SYSFLAG_COMPRESSED 0x1
#define SYSFLAG_BORNHOST_V6 0x10
#define SYSFLAG_STOREHOST_V6 0x20
#define SLOW_FLAGS (SYSFLAG_COMPRESSED | SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6)
#define FIELDS 16

static int32_t
be_i32(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
                     (uint32_t)p[3]);
}

static uint32_t
be_u32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
           (uint32_t)p[3];
}

static int64_t
be_i64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) {
        v = (v << 8) | (uint64_t)p[i];
    }
    return (int64_t)v;
}

/* "a.b.c.d:port", reusing the previous string when the address and port repeat. */
static PyObject *
host_string(const unsigned char *ip, int32_t port, unsigned char last_ip[4], int32_t *last_port,
            PyObject **last)
{
    if (*last != NULL && memcmp(ip, last_ip, 4) == 0 && port == *last_port) {
        Py_INCREF(*last);
        return *last;
    }
    PyObject *text = PyUnicode_FromFormat("%d.%d.%d.%d:%d", (int)ip[0], (int)ip[1], (int)ip[2],
                                          (int)ip[3], (int)port);
    if (text == NULL) {
        return NULL;
    }
    Py_XDECREF(*last);
    Py_INCREF(text);
    *last = text;
    memcpy(last_ip, ip, 4);
    *last_port = port;
    return text;
}

/* The properties dict of `len` bytes at `p` (decode_properties of their UTF-8 text): pairs end
 * with \x02, a name ends at the first \x01, pairs without a name or without \x01 are skipped,
 * a later pair wins. Returns NULL with no exception set when the bytes are not UTF-8 (the
 * record is then left to the Python code), NULL with an exception on a real failure. */
static PyObject *
properties_dict(const char *p, Py_ssize_t len)
{
    if (len > 0) {
        /* the whole text must be UTF-8, as the reference decodes it whole first */
        PyObject *whole = PyUnicode_DecodeUTF8(p, len, "strict");
        if (whole == NULL) {
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                PyErr_Clear();
            }
            return NULL;
        }
        Py_DECREF(whole);
    }
    PyObject *dict = PyDict_New();
    if (dict == NULL) {
        return NULL;
    }
    Py_ssize_t start = 0;
    while (start <= len) {
        const char *pair = p + start;
        const char *pair_stop = memchr(pair, 0x02, (size_t)(len - start));
        Py_ssize_t pair_len = pair_stop ? (Py_ssize_t)(pair_stop - pair) : len - start;
        const char *sep = pair_len > 0 ? memchr(pair, 0x01, (size_t)pair_len) : NULL;
        if (sep != NULL && sep > pair) {
            Py_ssize_t key_len = (Py_ssize_t)(sep - pair);
            PyObject *key = PyUnicode_DecodeUTF8(pair, key_len, "strict");
            PyObject *value =
                key ? PyUnicode_DecodeUTF8(sep + 1, pair_len - key_len - 1, "strict") : NULL;
            if (value == NULL || PyDict_SetItem(dict, key, value) < 0) {
                Py_XDECREF(key);
                Py_XDECREF(value);
                Py_DECREF(dict);
                return NULL; /* cannot be a decode error: the whole text decoded */
            }
            Py_DECREF(key);
            Py_DECREF(value);
        }
        start += pair_len + 1;
    }
    return dict;
}

static PyObject *
decode_plain(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer view;
    Py_ssize_t pos;
    PyTypeObject *message_type;
    if (!PyArg_ParseTuple(args, "y*nO!", &view, &pos, &PyType_Type, &message_type)) {
        return NULL;
    }
    if (!PyType_IsSubtype(message_type, &PyTuple_Type)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "message_type must be a tuple type");
        return NULL;
    }
    const unsigned char *data = (const unsigned char *)view.buf;
    const Py_ssize_t end = view.len;
    if (pos < 0 || pos > end) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "pos is outside the buffer");
        return NULL;
    }
    PyObject *messages = PyList_New(0);
    PyObject *topic = NULL, *born_last = NULL, *store_last = NULL;
    const unsigned char *topic_bytes = NULL;
    Py_ssize_t topic_len = -1;
    unsigned char born_ip[4] = {0}, store_ip[4] = {0};
    int32_t born_port = 0, store_port = 0;
    if (messages == NULL) {
        goto fail;
    }
    while (end - pos >= HEAD_SIZE) {
        const unsigned char *h = data + pos;
        int64_t total = be_i32(h);
        int32_t magic = be_i32(h + 4);
        int32_t sys_flag = be_i32(h + 36);
        int64_t body_length = be_i32(h + 84);
        int64_t record_end = (int64_t)pos + total;
        int64_t body_end = (int64_t)pos + HEAD_SIZE + body_length;
        if (magic != MAGIC_V1 || (sys_flag & SLOW_FLAGS) || body_length < 0 ||
            !(body_end + 3 <= record_end && record_end <= (int64_t)end)) {
            break;
        }
        Py_ssize_t this_topic_len = data[body_end];
        int64_t topic_end = body_end + 1 + this_topic_len;
        if (!(topic_end + 2 <= record_end)) {
            break;
        }
        int64_t properties_len = ((int64_t)data[topic_end] << 8) | (int64_t)data[topic_end + 1];
        if (topic_end + 2 + properties_len != record_end) {
            break;
        }
        const unsigned char *this_topic = data + body_end + 1;
        if (topic == NULL || this_topic_len != topic_len ||
            memcmp(this_topic, topic_bytes, (size_t)this_topic_len) != 0) {
            PyObject *decoded =
                PyUnicode_DecodeUTF8((const char *)this_topic, this_topic_len, "strict");
            if (decoded == NULL) {
                if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                    goto fail;
                }
                PyErr_Clear();
                break;
            }
            Py_XSETREF(topic, decoded);
            topic_bytes = this_topic;
            topic_len = this_topic_len;
        }
        PyObject *properties =
            properties_dict((const char *)data + topic_end + 2, (Py_ssize_t)properties_len);
        if (properties == NULL) {
            if (PyErr_Occurred()) {
                goto fail;
            }
            break;
        }
        PyObject *message = message_type->tp_alloc(message_type, FIELDS);
        if (message == NULL) {
            Py_DECREF(properties);
            goto fail;
        }
        Py_INCREF(topic);
        PyObject *items[FIELDS] = {
            topic,
            PyLong_FromLong(be_i32(h + 12)),
            PyLong_FromLong(be_i32(h + 16)),
            PyLong_FromLongLong(be_i64(h + 20)),
            PyLong_FromLongLong(be_i64(h + 28)),
            PyLong_FromLong(sys_flag),
            PyLong_FromLongLong(be_i64(h + 40)),
            host_string(h + 48, be_i32(h + 52), born_ip, &born_port, &born_last),
            PyLong_FromLongLong(be_i64(h + 56)),
            host_string(h + 64, be_i32(h + 68), store_ip, &store_port, &store_last),
            PyLong_FromLong(be_i32(h + 72)),
            PyLong_FromLongLong(be_i64(h + 76)),
            PyBytes_FromStringAndSize((const char *)h + HEAD_SIZE, (Py_ssize_t)body_length),
            properties,
            PyLong_FromUnsignedLong(be_u32(h + 8)),
            PyLong_FromLongLong(total),
        };
        int failed = 0;
        for (int i = 0; i < FIELDS; i++) {
            if (items[i] == NULL) {
                failed = 1;
            }
            PyTuple_SET_ITEM(message, i, items[i]); /* a NULL item is freed as NULL */
        }
        if (failed || PyList_Append(messages, message) < 0) {
            Py_DECREF(message);
            goto fail;
        }
        Py_DECREF(message);
        pos = (Py_ssize_t)record_end;
    }
    Py_XDECREF(topic);
    Py_XDECREF(born_last);
    Py_XDECREF(store_last);
    PyBuffer_Release(&view);
    return Py_BuildValue("(Nn)", messages, pos);

fail:
    Py_XDECREF(messages);
    Py_XDECREF(topic);
    Py_XDECREF(born_last);
    Py_XDECREF(store_last);
    PyBuffer_Release(&view);
    return NULL;
}

PyDoc_STRVAR(decode_plain_doc,
             "decode_plain(data, pos, message_type) -> (messages, stop)\n\n"
             "Decode consecutive common-path records of data from pos (see the module "
             "docstring); stop is where the first other record (or the end) begins.");

static PyMethodDef methods[] = {
    {"decode_plain", decode_plain, METH_VARARGS, decode_plain_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "ledgermq.wire._record_decode",
    "Message records to MessageExt tuples; ledgermq/wire/message.py holds the reference.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__record_decode(void)
{
    return PyModule_Create(&module_def);
}
