/* RocketMQ remoting frames with the binary (ROCKETMQ) header: the fast path of
 * ledgermq.wire.frame.
 *
 * Why C: every request and every response crosses FrameDecoder and _encode_head. With the JSON
 * header a single send's request took about 4.3 us to decode (orjson, then a dict checked field
 * by field into a RemotingCommand) and its answer 1.5 us to encode, a tenth of the master's
 * Python time per single send; the binary header read and written here takes a fraction of
 * that. Our own client and the replicas' links speak the binary header (serializeType
 * ROCKETMQ, as any RocketMQ client may); JSON frames stay on the Python path.
 *
 * decode_frames(data, pos, max_frame_bytes, max_header_bytes, max_ext_fields, max_commands,
 * commands, command_type, language_names) decodes consecutive whole binary-header frames of
 * `data` from `pos` until `commands` holds max_commands, appends a command_type(code, opaque, flag, remark, ext_fields, body, language, version,
 * 1) for each to `commands`, and returns where it stopped: the end of the whole frames, or the
 * first frame it leaves to the Python loop (a JSON header, an unknown type, a bad length, a
 * header over max_header_bytes or with more than max_ext_fields fields, a malformed header, an
 * incomplete frame). It never raises for bad input: the Python loop, which stays the reference
 * (_parse_binary_header), decodes or refuses that frame with its own message. The header limit
 * is checked from the header word, before the frame is whole, as the Python loop does: a frame
 * over it is refused without being buffered (issue 25 item 6).
 *
 * new_body(size) and fill_body(body, offset, data) receive a large frame's body straight into
 * its own bytes object, read by read (frame.py's _LargeFrame): new_body returns a bytes object of
 * `size` bytes whose contents are not set, fill_body copies `data` into it at `offset`. Writing
 * into a bytes object is only sound while nobody else has seen it: _LargeFrame holds the only
 * reference until every byte is written, then hands it out. The reference keeps the reads and
 * joins them.
 *
 * ABI is 4 since decode_frames takes the two header limits and max_commands and the body
 * functions exist; frame.py uses no other build.
 *
 * encode_head(code, language, version, opaque, flag, remark, ext_fields, body_length) returns
 * the length prefix, the header word and the binary header, or None for anything it does not
 * take (a value out of its field's range, a non-str key or value, a mapping that is not a dict,
 * a string that is not valid UTF-8): the Python reference (_encode_binary_head_py) then decides.
 * Both are tested equal to their references with hypothesis (tests/wire/test_frame_codec.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define SERIALIZE_ROCKETMQ 1
#define FIXED_SIZE 13 /* int16 code, int8 language, int16 version, int32 opaque, int32 flag */
#define MAX_HEADER_LENGTH 0xFFFFFF

static int32_t
be_i32(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
                     (uint32_t)p[3]);
}

static int16_t
be_i16(const unsigned char *p)
{
    return (int16_t)(((uint16_t)p[0] << 8) | (uint16_t)p[1]);
}

static void
put_i32(unsigned char *p, int32_t value)
{
    uint32_t v = (uint32_t)value;
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static void
put_i16(unsigned char *p, int16_t value)
{
    uint16_t v = (uint16_t)value;
    p[0] = (unsigned char)(v >> 8);
    p[1] = (unsigned char)v;
}

/* A str of raw[start:start+length] (strict UTF-8), NULL with no exception set on bad bytes. */
static PyObject *
utf8(const unsigned char *raw, Py_ssize_t length)
{
    PyObject *text = PyUnicode_DecodeUTF8((const char *)raw, length, NULL);
    if (text == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
    }
    return text;
}

/* The command of one binary header and its body; NULL without an exception set: leave the frame
 * to the Python reference; NULL with one set: a real error (memory). */
static PyObject *
decode_command(const unsigned char *raw, Py_ssize_t size, PyObject *body, PyObject *command_type,
               PyObject *language_names, Py_ssize_t max_ext_fields)
{
    if (size < FIXED_SIZE + 4) {
        return NULL;
    }
    int16_t code = be_i16(raw);
    int8_t language = (int8_t)raw[2];
    int16_t version = be_i16(raw + 3);
    int32_t opaque = be_i32(raw + 5);
    int32_t flag = be_i32(raw + 9);
    Py_ssize_t pos = FIXED_SIZE;
    int32_t remark_length = be_i32(raw + pos);
    pos += 4;
    if (remark_length < 0 || remark_length > size - pos) {
        return NULL;
    }
    PyObject *remark = NULL;
    if (remark_length > 0) {
        remark = utf8(raw + pos, remark_length);
        if (remark == NULL) {
            return NULL;
        }
    }
    pos += remark_length;
    PyObject *fields = NULL;
    PyObject *language_name = NULL;
    PyObject *result = NULL;
    if (size - pos < 4) {
        goto done;
    }
    int32_t ext_length = be_i32(raw + pos);
    pos += 4;
    if (ext_length < 0 || ext_length != size - pos) {
        goto done;
    }
    Py_ssize_t end = size;
    fields = PyDict_New();
    if (fields == NULL) {
        goto done;
    }
    Py_ssize_t count = 0;
    while (pos < end) {
        if (++count > max_ext_fields) {
            goto done;
        }
        if (end - pos < 2) {
            goto done;
        }
        int16_t key_length = be_i16(raw + pos);
        pos += 2;
        if (key_length < 0 || key_length > end - pos) {
            goto done;
        }
        PyObject *key = utf8(raw + pos, key_length);
        if (key == NULL) {
            goto done;
        }
        pos += key_length;
        if (end - pos < 4) {
            Py_DECREF(key);
            goto done;
        }
        int32_t value_length = be_i32(raw + pos);
        pos += 4;
        if (value_length < 0 || value_length > end - pos) {
            Py_DECREF(key);
            goto done;
        }
        PyObject *value = utf8(raw + pos, value_length);
        if (value == NULL) {
            Py_DECREF(key);
            goto done;
        }
        pos += value_length;
        int failed = PyDict_SetItem(fields, key, value);
        Py_DECREF(key);
        Py_DECREF(value);
        if (failed) {
            goto done;
        }
    }
    Py_ssize_t names = PyTuple_GET_SIZE(language_names);
    /* the last name is the one for an ordinal RocketMQ does not define ("OTHER") */
    if (language >= 0 && language < names - 1) {
        language_name = PyTuple_GET_ITEM(language_names, language);
    }
    else {
        language_name = PyTuple_GET_ITEM(language_names, names - 1);
    }
    Py_INCREF(language_name);
    result = PyObject_CallFunction(command_type, "iiiOOOOii", (int)code, (int)opaque, (int)flag,
                                   remark == NULL ? Py_None : remark, fields, body, language_name,
                                   (int)version, SERIALIZE_ROCKETMQ);
done:
    Py_XDECREF(remark);
    Py_XDECREF(fields);
    Py_XDECREF(language_name);
    return result;
}

static PyObject *
decode_frames(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos;
    Py_ssize_t limit;
    Py_ssize_t max_header_bytes;
    Py_ssize_t max_ext_fields;
    Py_ssize_t max_commands;
    PyObject *commands;
    PyObject *command_type;
    PyObject *language_names;
    if (!PyArg_ParseTuple(args, "y*nnnnnO!OO!", &view, &pos, &limit, &max_header_bytes,
                          &max_ext_fields, &max_commands, &PyList_Type, &commands, &command_type,
                          &PyTuple_Type, &language_names)) {
        return NULL;
    }
    if (PyTuple_GET_SIZE(language_names) < 1) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "language_names must name at least one language");
        return NULL;
    }
    const unsigned char *data = (const unsigned char *)view.buf;
    Py_ssize_t end = view.len;
    if (pos < 0) {
        pos = 0;
    }
    while (pos <= end && end - pos >= 8 && PyList_GET_SIZE(commands) < max_commands) {
        int32_t length = be_i32(data + pos);
        if (length < 4 || length > limit) {
            break;
        }
        int32_t word = be_i32(data + pos + 4);
        int kind = (int)(((uint32_t)word >> 24) & 0xFF);
        Py_ssize_t header_length = (Py_ssize_t)((uint32_t)word & 0xFFFFFF);
        if (header_length > (Py_ssize_t)length - 4 || header_length > max_header_bytes) {
            break;
        }
        Py_ssize_t frame_end = pos + 4 + (Py_ssize_t)length;
        if (end < frame_end) {
            break;
        }
        if (kind != SERIALIZE_ROCKETMQ) {
            break;
        }
        Py_ssize_t header_end = pos + 8 + header_length;
        PyObject *body = PyBytes_FromStringAndSize((const char *)data + header_end,
                                                   frame_end - header_end);
        if (body == NULL) {
            PyBuffer_Release(&view);
            return NULL;
        }
        PyObject *command =
            decode_command(data + pos + 8, header_length, body, command_type, language_names,
                           max_ext_fields);
        Py_DECREF(body);
        if (command == NULL) {
            if (PyErr_Occurred()) {
                PyBuffer_Release(&view);
                return NULL;
            }
            break;
        }
        int failed = PyList_Append(commands, command);
        Py_DECREF(command);
        if (failed) {
            PyBuffer_Release(&view);
            return NULL;
        }
        pos = frame_end;
    }
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(pos);
}

/* The UTF-8 of an exact str, or NULL with no exception set for anything else (or a str with
 * lone surrogates, which has no UTF-8). */
static const char *
exact_utf8(PyObject *text, Py_ssize_t *size)
{
    if (!PyUnicode_CheckExact(text)) {
        return NULL;
    }
    const char *bytes = PyUnicode_AsUTF8AndSize(text, size);
    if (bytes == NULL) {
        PyErr_Clear();
    }
    return bytes;
}

/* An int (or an int subclass: the request and response codes are IntEnums) in [low, high] into
 * *out; 0 (no exception set) for anything else. */
static int
ranged(PyObject *number, long low, long high, long *out)
{
    if (!PyLong_Check(number)) {
        return 0;
    }
    int overflow = 0;
    long value = PyLong_AsLongAndOverflow(number, &overflow);
    if (overflow || (value == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    if (value < low || value > high) {
        return 0;
    }
    *out = value;
    return 1;
}

static PyObject *
encode_head(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "encode_head takes exactly 8 arguments");
        return NULL;
    }
    long code, language, version, opaque, flag, body_length;
    if (!ranged(args[0], INT16_MIN, INT16_MAX, &code) ||
        !ranged(args[1], INT8_MIN, INT8_MAX, &language) ||
        !ranged(args[2], INT16_MIN, INT16_MAX, &version) ||
        !ranged(args[3], INT32_MIN, INT32_MAX, &opaque) ||
        !ranged(args[4], INT32_MIN, INT32_MAX, &flag) ||
        !ranged(args[7], 0, INT32_MAX, &body_length)) {
        Py_RETURN_NONE;
    }
    PyObject *remark = args[5];
    const char *remark_bytes = "";
    Py_ssize_t remark_size = 0;
    if (remark != Py_None) {
        remark_bytes = exact_utf8(remark, &remark_size);
        if (remark_bytes == NULL) {
            Py_RETURN_NONE;
        }
    }
    PyObject *fields = args[6];
    if (!PyDict_CheckExact(fields)) {
        Py_RETURN_NONE;
    }
    /* First pass: check every key and value and add up the size. */
    Py_ssize_t size = FIXED_SIZE + 4 + remark_size + 4;
    Py_ssize_t at = 0;
    PyObject *key;
    PyObject *value;
    while (PyDict_Next(fields, &at, &key, &value)) {
        Py_ssize_t key_size;
        Py_ssize_t value_size;
        if (exact_utf8(key, &key_size) == NULL || exact_utf8(value, &value_size) == NULL) {
            Py_RETURN_NONE;
        }
        if (key_size > INT16_MAX) {
            Py_RETURN_NONE;
        }
        size += 2 + key_size + 4 + value_size;
        if (size > MAX_HEADER_LENGTH) {
            Py_RETURN_NONE;
        }
    }
    if (size > MAX_HEADER_LENGTH || 4 + size + body_length > INT32_MAX) {
        Py_RETURN_NONE;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, 8 + size);
    if (out == NULL) {
        return NULL;
    }
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
    put_i32(p, (int32_t)(4 + size + body_length));
    put_i32(p + 4, (int32_t)(((uint32_t)SERIALIZE_ROCKETMQ << 24) | (uint32_t)size));
    p += 8;
    put_i16(p, (int16_t)code);
    p[2] = (unsigned char)(int8_t)language;
    put_i16(p + 3, (int16_t)version);
    put_i32(p + 5, (int32_t)opaque);
    put_i32(p + 9, (int32_t)flag);
    p += FIXED_SIZE;
    put_i32(p, (int32_t)remark_size);
    p += 4;
    memcpy(p, remark_bytes, (size_t)remark_size);
    p += remark_size;
    put_i32(p, (int32_t)(size - (FIXED_SIZE + 4 + remark_size + 4)));
    p += 4;
    at = 0;
    while (PyDict_Next(fields, &at, &key, &value)) {
        Py_ssize_t key_size;
        Py_ssize_t value_size;
        /* cached by the first pass: these cannot fail now */
        const char *key_bytes = PyUnicode_AsUTF8AndSize(key, &key_size);
        const char *value_bytes = PyUnicode_AsUTF8AndSize(value, &value_size);
        if (key_bytes == NULL || value_bytes == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        put_i16(p, (int16_t)key_size);
        p += 2;
        memcpy(p, key_bytes, (size_t)key_size);
        p += key_size;
        put_i32(p, (int32_t)value_size);
        p += 4;
        memcpy(p, value_bytes, (size_t)value_size);
        p += value_size;
    }
    return out;
}

static PyObject *
new_body(PyObject *Py_UNUSED(module), PyObject *arg)
{
    Py_ssize_t size = PyLong_AsSsize_t(arg);
    if (size == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "new_body: the size must not be negative");
        return NULL;
    }
    return PyBytes_FromStringAndSize(NULL, size);
}

static PyObject *
fill_body(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "fill_body takes exactly 3 arguments");
        return NULL;
    }
    PyObject *body = args[0];
    if (!PyBytes_CheckExact(body)) {
        PyErr_SetString(PyExc_TypeError, "fill_body: body must be a bytes object from new_body");
        return NULL;
    }
    Py_ssize_t offset = PyLong_AsSsize_t(args[1]);
    if (offset == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_buffer data;
    if (PyObject_GetBuffer(args[2], &data, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    Py_ssize_t size = PyBytes_GET_SIZE(body);
    if (offset < 0 || offset > size || data.len > size - offset) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "fill_body: the data runs past the body");
        return NULL;
    }
    memcpy(PyBytes_AS_STRING(body) + offset, data.buf, (size_t)data.len);
    PyBuffer_Release(&data);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"decode_frames", decode_frames, METH_VARARGS,
     "decode_frames(data, pos, max_frame_bytes, max_header_bytes, max_ext_fields, max_commands, "
     "commands, command_type, language_names) -> where it stopped: the binary-header frames of "
     "data from pos, appended to commands."},
    {"encode_head", (PyCFunction)(void (*)(void))encode_head, METH_FASTCALL,
     "encode_head(code, language, version, opaque, flag, remark, ext_fields, body_length) -> "
     "the length prefix, header word and binary header, or None (the reference decides)."},
    {"new_body", new_body, METH_O,
     "new_body(size) -> a bytes object of size bytes, contents not set, for fill_body."},
    {"fill_body", (PyCFunction)(void (*)(void))fill_body, METH_FASTCALL,
     "fill_body(body, offset, data) -> None: copy data into body (from new_body) at offset."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_frame_codec", "RocketMQ binary-header frames (see frame.py).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__frame_codec(void)
{
    PyObject *created = PyModule_Create(&module);
    if (created != NULL && PyModule_AddIntConstant(created, "ABI", 4) < 0) {
        Py_DECREF(created);
        return NULL;
    }
    return created;
}
