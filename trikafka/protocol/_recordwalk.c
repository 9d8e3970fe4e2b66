/* The record walk of records.py in C: the checks Kafka's LogValidator makes on every record of
 * an uncompressed batch v2 (record lengths, varints, offset deltas, key/value/header sizes).
 *
 * Why: with 100-byte messages this walk was ~73 % of the broker's CPU in Python (~0.8 us per
 * record on an idle machine). It is the only per-record loop on the produce path.
 *
 * The pure-Python walk in records.py (_py_walk_records / _check_record / _read_varint) is the
 * reference: this file makes exactly its checks, in its order, and raises the same
 * InvalidRecordError with the same message, so a batch is accepted or refused identically
 * whichever walk runs (tests/protocol/test_record_walk_native.py holds both to that on
 * arbitrary and mutated batches). Change the two together.
 *
 * check_batch is the whole of records._validate_batch for a batch that passes it: header
 * checks, CRC-32C (the same crc32c function the reference calls) and the walk, returning the
 * header's fields. On anything the reference would refuse it returns None and the caller runs
 * the reference, so every error is the reference's own (a property test holds the two paths
 * to the same headers and the same errors).
 *
 * Integers: Python's varint reader returns up to 35 bits for a 5-byte varint (it does not
 * truncate to 32 like Kafka's), so every value here is int64; positions are Py_ssize_t and
 * never overflow (a size is below 2**35, a buffer far below 2**62). The 10-byte timestamp
 * delta is only skipped: its value is never used.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h> /* T_OBJECT_EX: the slots record_objects fills */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h> /* clock_gettime: new_future's CreateTime */

static PyObject *InvalidRecordError = NULL; /* trikafka.errors.InvalidRecordError */
static PyObject *crc32c_function = NULL;    /* crc32c.crc32c, the reference's CRC, from
                                               trikafka.protocol.crc.implementation() on the
                                               first batch (see crc.py for why not the package) */

static int
fail(const char *message)
{
    PyErr_SetString(InvalidRecordError, message);
    return -1;
}

/* A zig-zag varint of at most 5 bytes at *pos (bounded by end), without an exception: 0, or
 * -1 when the bytes end inside it, -2 when it runs past 5 bytes (_read_varint's two errors). */
static inline int
peek_varint(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, int64_t *out)
{
    Py_ssize_t p = *pos;
    if (p < end && buf[p] < 0x80) { /* one byte: nearly every size and delta */
        int64_t v = buf[p];
        *out = (v >> 1) ^ -(v & 1);
        *pos = p + 1;
        return 0;
    }
    uint64_t result = 0;
    for (int i = 0; i < 5; i++) {
        if (p >= end)
            return -1;
        unsigned char byte = buf[p++];
        result |= (uint64_t)(byte & 0x7F) << (7 * i);
        if (!(byte & 0x80)) {
            int64_t v = (int64_t)result; /* < 2**35 */
            *out = (v >> 1) ^ -(v & 1);
            *pos = p;
            return 0;
        }
    }
    return -2;
}

/* Read a zig-zag varint of at most 5 bytes at *pos (bounded by end). _read_varint's twin. */
static inline int
read_varint(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, int64_t *out)
{
    int status = peek_varint(buf, pos, end, out);
    if (status == 0)
        return 0;
    return fail(status == -1 ? "record ends inside a varint" : "varint longer than 5 bytes");
}

/* Skip a varlong (at most 10 bytes): the record's timestamp delta. */
static inline int
skip_varlong(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end)
{
    Py_ssize_t p = *pos;
    for (int i = 0; i < 10; i++) {
        if (p >= end)
            return fail("record ends inside a varint");
        if (!(buf[p++] & 0x80)) {
            *pos = p;
            return 0;
        }
    }
    return fail("varint longer than 10 bytes");
}

/* One record's fields from position (just after its length) to end; _check_record's twin. */
static int
check_record(const unsigned char *buf, Py_ssize_t position, Py_ssize_t end, int64_t *offset_delta)
{
    char message[160];
    int64_t size, header_count;
    Py_ssize_t p = position + 1; /* attributes, unused in v2 */
    if (skip_varlong(buf, &p, end) < 0)
        return -1;
    if (read_varint(buf, &p, end, offset_delta) < 0)
        return -1;
    static const char *const fields[2] = {"key", "value"};
    for (int f = 0; f < 2; f++) {
        if (read_varint(buf, &p, end, &size) < 0)
            return -1;
        if (size < -1) {
            snprintf(message, sizeof message, "record %s has size %lld", fields[f],
                     (long long)size);
            return fail(message);
        }
        if (size > 0)
            p += (Py_ssize_t)size;
    }
    if (read_varint(buf, &p, end, &header_count) < 0)
        return -1;
    if (header_count < 0) {
        snprintf(message, sizeof message, "record has %lld headers", (long long)header_count);
        return fail(message);
    }
    /* Each header reads two varints, so p advances at least 2 per turn and the loop ends at
     * the record's end however large the count. */
    for (int64_t h = 0; h < header_count; h++) {
        if (read_varint(buf, &p, end, &size) < 0)
            return -1;
        if (size < 0) {
            snprintf(message, sizeof message, "record header key has size %lld", (long long)size);
            return fail(message);
        }
        p += (Py_ssize_t)size;
        if (read_varint(buf, &p, end, &size) < 0)
            return -1;
        if (size < -1) {
            snprintf(message, sizeof message, "record header value has size %lld",
                     (long long)size);
            return fail(message);
        }
        if (size > 0)
            p += (Py_ssize_t)size;
    }
    if (p != end) {
        snprintf(message, sizeof message, "record declares %+lld bytes more than its fields hold",
                 (long long)(end - p));
        return fail(message);
    }
    return 0;
}

static int
walk(const unsigned char *buf, Py_ssize_t position, Py_ssize_t end, long long count,
     long long base)
{
    char message[200];
    for (long long index = 0; index < count; index++) {
        if (position >= end) {
            snprintf(message, sizeof message, "batch at offset %lld declares %lld records, holds %lld",
                     base, count, index);
            return fail(message);
        }
        int64_t length, offset_delta;
        if (read_varint(buf, &position, end, &length) < 0)
            return -1;
        Py_ssize_t record_end = position + (Py_ssize_t)length;
        if (length <= 0 || record_end > end) {
            snprintf(message, sizeof message, "record %lld of batch at offset %lld has size %lld",
                     index, base, (long long)length);
            return fail(message);
        }
        if (check_record(buf, position, record_end, &offset_delta) < 0)
            return -1;
        if (offset_delta != index) {
            snprintf(message, sizeof message,
                     "record %lld of batch at offset %lld has offset delta %lld", index, base,
                     (long long)offset_delta);
            return fail(message);
        }
        position = record_end;
    }
    if (position != end) {
        snprintf(message, sizeof message,
                 "batch at offset %lld: %lld bytes follow the last of %lld records", base,
                 (long long)(end - position), count);
        return fail(message);
    }
    return 0;
}

PyDoc_STRVAR(walk_records_doc,
"walk_records(buffer, position, end, count, base_offset)\n"
"--\n\n"
"Check that buffer[position:end] holds exactly count well-formed records (the records area of\n"
"an uncompressed batch whose base offset is base_offset). Returns None; raises\n"
"InvalidRecordError exactly as records._py_walk_records does. ValueError when position or end\n"
"lie outside the buffer (a caller's bug, not the batch's).");

static PyObject *
walk_records(PyObject *module, PyObject *args)
{
    (void)module;
    Py_buffer view;
    Py_ssize_t position, end;
    long long count, base;
    if (!PyArg_ParseTuple(args, "y*nnLL:walk_records", &view, &position, &end, &count, &base))
        return NULL;
    if (position < 0 || end < 0 || end > view.len) {
        PyBuffer_Release(&view);
        PyErr_Format(PyExc_ValueError,
                     "walk_records: position %zd and end %zd must lie within the %zd-byte buffer",
                     position, end, view.len);
        return NULL;
    }
    int status = walk((const unsigned char *)view.buf, position, end, count, base);
    PyBuffer_Release(&view);
    if (status < 0)
        return NULL;
    Py_RETURN_NONE;
}

static inline int64_t
be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return (int64_t)v;
}

static inline int32_t
be32(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
                     (uint32_t)p[3]);
}

static inline int16_t
be16(const unsigned char *p)
{
    return (int16_t)(((uint16_t)p[0] << 8) | (uint16_t)p[1]);
}

/* The batch at position (of a buffer whose batches end at total) if it passes every check of
 * records._validate_batch: a new reference to the tuple of its header fields after position
 * (size, base offset, ... record count), else a new reference to None. NULL only on a
 * caller's error. */
static PyObject *
check_one(const unsigned char *buf, Py_ssize_t position, Py_ssize_t total, int walk_flag)
{
    const unsigned char *b = buf + position;
    Py_ssize_t remaining = total - position;
    if (remaining < 61 || b[16] != 2)
        Py_RETURN_NONE;
    int32_t batch_length = be32(b + 8);
    if (batch_length < 49 || (Py_ssize_t)batch_length + 12 > remaining)
        Py_RETURN_NONE;
    Py_ssize_t size = (Py_ssize_t)batch_length + 12;
    int64_t base_offset = be64(b);
    int32_t leader_epoch = be32(b + 12);
    uint32_t crc = (uint32_t)be32(b + 17);
    int16_t attributes = be16(b + 21);
    int32_t last_offset_delta = be32(b + 23);
    int64_t base_timestamp = be64(b + 27);
    int64_t max_timestamp = be64(b + 35);
    int64_t producer_id = be64(b + 43);
    int16_t producer_epoch = be16(b + 51);
    int32_t base_sequence = be32(b + 53);
    int32_t count = be32(b + 57);
    if (crc32c_function == NULL) {
        /* crc.implementation(): the package's function, loaded without its slow __init__ */
        PyObject *crc = PyImport_ImportModule("trikafka.protocol.crc");
        if (crc == NULL)
            return NULL;
        crc32c_function = PyObject_CallMethod(crc, "implementation", NULL);
        Py_DECREF(crc);
        if (crc32c_function == NULL)
            return NULL;
    }
    PyObject *covered = PyMemoryView_FromMemory((char *)b + 21, size - 21, PyBUF_READ);
    if (covered == NULL)
        return NULL;
    PyObject *computed = PyObject_CallOneArg(crc32c_function, covered);
    Py_DECREF(covered);
    if (computed == NULL) { /* the reference makes the same call: let it raise */
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    unsigned long actual = PyLong_AsUnsignedLong(computed);
    Py_DECREF(computed);
    if (actual == (unsigned long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    int compression = attributes & 0x07;
    if (actual != crc || compression > 4 || last_offset_delta < 0 || count < 0 ||
        (walk_flag && count && (int64_t)count != (int64_t)last_offset_delta + 1) ||
        ((attributes & 0x10) && producer_id < 0))
        Py_RETURN_NONE;
    if (walk_flag && compression == 0 &&
        walk(buf, position + 61, position + size, count, base_offset) < 0) {
        PyErr_Clear(); /* the reference walks again and raises this very error */
        Py_RETURN_NONE;
    }
    return Py_BuildValue("(nLiiIiiLLLiii)", size, (long long)base_offset, (int)leader_epoch, 2,
                         (unsigned int)crc, (int)attributes, (int)last_offset_delta,
                         (long long)base_timestamp, (long long)max_timestamp,
                         (long long)producer_id, (int)producer_epoch, (int)base_sequence,
                         (int)count);
}

PyDoc_STRVAR(check_batch_doc,
"check_batch(buffer, position, total, walk)\n"
"--\n\n"
"The header fields after position (size, base_offset, partition_leader_epoch, magic, crc,\n"
"attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch,\n"
"base_sequence, record_count) of the batch at position, when it passes every check of\n"
"records._validate_batch (with the record walk when walk is true and the batch is not\n"
"compressed); None when it does not, so the caller runs the reference for the error.\n"
"ValueError when position or total lie outside the buffer.");

static PyObject *
check_batch(PyObject *module, PyObject *args)
{
    (void)module;
    Py_buffer view;
    Py_ssize_t position, total;
    int walk_flag;
    if (!PyArg_ParseTuple(args, "y*nnp:check_batch", &view, &position, &total, &walk_flag))
        return NULL;
    if (position < 0 || total < position || total > view.len) {
        PyBuffer_Release(&view);
        PyErr_Format(PyExc_ValueError,
                     "check_batch: position %zd and total %zd must lie within the %zd-byte buffer",
                     position, total, view.len);
        return NULL;
    }
    PyObject *result = check_one((const unsigned char *)view.buf, position, total, walk_flag);
    PyBuffer_Release(&view);
    return result;
}

/* --- decoding: record_reader._py_record_tuples in C --------------------------------------------- */

/* A varlong (at most 10 bytes) whose value fits 64 bits, else -1 with no exception set: the
 * caller then declines and the reference decodes (it reads up to 70 bits into a Python int). */
static inline int
read_varlong64(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, int64_t *out)
{
    Py_ssize_t p = *pos;
    uint64_t result = 0;
    for (int i = 0; i < 10; i++) {
        if (p >= end)
            return -1;
        unsigned char byte = buf[p++];
        if (i == 9 && (byte & 0x7F) > 1)
            return -1;
        result |= (uint64_t)(byte & 0x7F) << (7 * i);
        if (!(byte & 0x80)) {
            *out = (int64_t)(result >> 1) ^ -(int64_t)(result & 1);
            *pos = p;
            return 0;
        }
    }
    return -1;
}

/* _read_bytes' twin: a new reference to bytes or None in *out; 1 when the reference would
 * raise (the caller declines), -1 on a Python error (memory). */
static inline int
read_field(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, PyObject **out)
{
    int64_t size;
    if (peek_varint(buf, pos, end, &size) < 0)
        return 1;
    if (size < 0) {
        *out = Py_NewRef(Py_None);
        return 0;
    }
    if (*pos + (Py_ssize_t)size > end)
        return 1;
    *out = PyBytes_FromStringAndSize((const char *)buf + *pos, (Py_ssize_t)size);
    if (*out == NULL)
        return -1;
    *pos += (Py_ssize_t)size;
    return 0;
}

/* The headers of one record as a tuple of (str, bytes | None); 1/-1 as read_field. */
static int
read_headers(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, PyObject **out)
{
    int64_t count;
    if (peek_varint(buf, pos, end, &count) < 0)
        return 1;
    if (count <= 0) {
        *out = PyTuple_New(0);
        return *out == NULL ? -1 : 0;
    }
    /* Each header reads two varints: a count beyond the record's bytes fails below. */
    PyObject *list = PyList_New(0);
    if (list == NULL)
        return -1;
    for (int64_t h = 0; h < count; h++) {
        PyObject *name = NULL, *value = NULL, *text, *pair;
        int status = read_field(buf, pos, end, &name);
        if (status == 0)
            status = read_field(buf, pos, end, &value);
        if (status != 0) {
            Py_XDECREF(name);
            Py_DECREF(list);
            return status;
        }
        if (name == Py_None)
            text = PyUnicode_FromStringAndSize("", 0);
        else
            text = PyUnicode_DecodeUTF8(PyBytes_AS_STRING(name), PyBytes_GET_SIZE(name), "replace");
        Py_DECREF(name);
        pair = text == NULL ? NULL : PyTuple_Pack(2, text, value);
        Py_XDECREF(text);
        Py_DECREF(value);
        if (pair == NULL || PyList_Append(list, pair) < 0) {
            Py_XDECREF(pair);
            Py_DECREF(list);
            return -1;
        }
        Py_DECREF(pair);
    }
    *out = PyList_AsTuple(list);
    Py_DECREF(list);
    return *out == NULL ? -1 : 0;
}

/* What record_objects builds instead of tuples: instances of a slotted class (an attrs
 * class without converters, validators or __attrs_post_init__, whose __init__ only stores its
 * arguments), each of the five record fields and each constant stored at its slot's offset.
 * attrs' frozen __init__ costs ~1.1 us for nine fields (object.__setattr__ per field): more
 * than decoding the record. */
#define MAX_CONSTANTS 8
typedef struct {
    PyTypeObject *cls;
    Py_ssize_t record_offsets[5]; /* offset, timestamp, key, value, headers */
    Py_ssize_t constant_offsets[MAX_CONSTANTS];
    PyObject *constants[MAX_CONSTANTS];
    Py_ssize_t constant_count;
    int64_t floor; /* records below this offset are decoded, then left out */
} Maker;

static PyObject *
make_object(const Maker *maker, PyObject *const fields[5])
{
    PyObject *obj = maker->cls->tp_alloc(maker->cls, 0); /* every slot NULL */
    if (obj == NULL)
        return NULL;
    /* Py_XSETREF: a slot named twice keeps its last value and leaks nothing. */
    for (int i = 0; i < 5; i++)
        Py_XSETREF(*(PyObject **)((char *)obj + maker->record_offsets[i]), Py_NewRef(fields[i]));
    for (Py_ssize_t i = 0; i < maker->constant_count; i++)
        Py_XSETREF(*(PyObject **)((char *)obj + maker->constant_offsets[i]),
                   Py_NewRef(maker->constants[i]));
    /* Out of the cyclic GC's sight, as CPython does for tuples of atoms: the record's fields are
     * ints, str, bytes, None, tuples of those and the constants given (an enum member), none of
     * which can lead back to it, so it can never be part of a cycle. Tracked, a fetch of 100,000
     * records set off full collections over every object the process has: the Trio consumer
     * spent ~45 % of its time in the GC (100 B records: 90 -> 170 MB/s with it off). */
    if (PyObject_GC_IsTracked(obj))
        PyObject_GC_UnTrack(obj);
    return obj;
}

/* The records of buf[position:end] as a list of (offset, timestamp, key, value, headers)
 * tuples (maker NULL) or of maker's objects, or a new reference to None when the reference
 * would raise or read past the batch (it then runs from the start and answers itself).
 * NULL only on a Python error. */
static PyObject *
decode(const unsigned char *buf, Py_ssize_t position, Py_ssize_t end, long long count,
       int64_t base_offset, int64_t base_timestamp, PyObject *append_time, const Maker *maker)
{
    if (count > end - position) /* a record takes at least two bytes: the reference fails */
        Py_RETURN_NONE;
    PyObject *out = PyList_New(count > 0 ? (Py_ssize_t)count : 0);
    if (out == NULL)
        return NULL;
    for (long long index = 0; index < count; index++) {
        int64_t length, ts_delta, offset_delta, offset, timestamp = 0;
        PyObject *key = NULL, *value = NULL, *headers = NULL, *ts_object, *offset_object, *record;
        int status = 1;
        if (peek_varint(buf, &position, end, &length) < 0 || length <= 0 || length > end - position)
            goto decline;
        Py_ssize_t record_end = position + (Py_ssize_t)length;
        Py_ssize_t p = position + 1; /* attributes, unused in v2 */
        if (read_varlong64(buf, &p, record_end, &ts_delta) < 0 ||
            peek_varint(buf, &p, record_end, &offset_delta) < 0 ||
            __builtin_add_overflow(base_offset, offset_delta, &offset) ||
            (append_time == Py_None &&
             __builtin_add_overflow(base_timestamp, ts_delta, &timestamp)))
            goto decline;
        status = read_field(buf, &p, record_end, &key);
        if (status == 0)
            status = read_field(buf, &p, record_end, &value);
        if (status == 0)
            status = read_headers(buf, &p, record_end, &headers);
        if (status != 0) {
            Py_XDECREF(key);
            Py_XDECREF(value);
            if (status < 0) {
                Py_DECREF(out);
                return NULL;
            }
            goto decline;
        }
        offset_object = PyLong_FromLongLong(offset);
        ts_object = append_time == Py_None ? PyLong_FromLongLong(timestamp) : Py_NewRef(append_time);
        if (offset_object == NULL || ts_object == NULL)
            record = NULL;
        else if (maker == NULL)
            record = PyTuple_Pack(5, offset_object, ts_object, key, value, headers);
        else if (offset < maker->floor)
            record = Py_NewRef(Py_None); /* left out below */
        else {
            PyObject *const fields[5] = {offset_object, ts_object, key, value, headers};
            record = make_object(maker, fields);
        }
        Py_XDECREF(offset_object);
        Py_XDECREF(ts_object);
        Py_DECREF(key);
        Py_DECREF(value);
        Py_DECREF(headers);
        if (record == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)index, record);
        position = record_end;
    }
    if (maker != NULL && count > 0 && PyList_GET_ITEM(out, 0) == Py_None) {
        /* Records below the floor: only at the front (offsets rise within a batch). */
        Py_ssize_t skip = 0;
        while (skip < PyList_GET_SIZE(out) && PyList_GET_ITEM(out, skip) == Py_None)
            skip++;
        if (PyList_SetSlice(out, 0, skip, NULL) < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
decline:
    Py_DECREF(out); /* the unset items are NULL: list_dealloc skips them */
    Py_RETURN_NONE;
}

PyDoc_STRVAR(decode_records_doc,
"decode_records(buffer, position, end, count, base_offset, base_timestamp, append_time)\n"
"--\n\n"
"The count records of an uncompressed batch whose records area starts at position and whose\n"
"batch ends at end, as a list of (offset, timestamp, key, value, headers) tuples, exactly as\n"
"record_reader._py_record_tuples yields them (append_time: the batch's max timestamp for a\n"
"LogAppendTime batch, else None). None when that reference would raise or read past end:\n"
"the caller then runs the reference for its answer. ValueError when position or end lie\n"
"outside the buffer.");

static PyObject *
decode_records(PyObject *module, PyObject *args)
{
    (void)module;
    Py_buffer view;
    Py_ssize_t position, end;
    long long count, base_offset, base_timestamp;
    PyObject *append_time;
    if (!PyArg_ParseTuple(args, "y*nnLLLO:decode_records", &view, &position, &end, &count,
                          &base_offset, &base_timestamp, &append_time))
        return NULL;
    if (position < 0 || end < position || end > view.len) {
        PyBuffer_Release(&view);
        PyErr_Format(PyExc_ValueError,
                     "decode_records: position %zd and end %zd must lie within the %zd-byte buffer",
                     position, end, view.len);
        return NULL;
    }
    PyObject *result = decode((const unsigned char *)view.buf, position, end, count,
                              (int64_t)base_offset, (int64_t)base_timestamp, append_time, NULL);
    PyBuffer_Release(&view);
    return result;
}

/* The offset of the object slot that descriptor d stores into for instances of cls. */
static int
slot_offset(PyTypeObject *cls, PyObject *d, Py_ssize_t *offset)
{
    if (!PyObject_TypeCheck(d, &PyMemberDescr_Type) ||
        !PyType_IsSubtype(cls, PyDescr_TYPE(d)) ||
        ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX ||
        (((PyMemberDescrObject *)d)->d_member->flags & READONLY)) {
        PyErr_Format(PyExc_TypeError, "record_objects: %R is not a writable object slot of %R",
                     d, (PyObject *)cls);
        return -1;
    }
    *offset = ((PyMemberDescrObject *)d)->d_member->offset;
    return 0;
}

PyDoc_STRVAR(record_objects_doc,
"record_objects(buffer, position, end, count, base_offset, base_timestamp, append_time,\n"
"               cls, record_slots, constant_slots, constants, floor)\n"
"--\n\n"
"decode_records, but each record an instance of cls made without calling its __init__: the\n"
"five record fields stored in record_slots (member descriptors of cls, in the order offset,\n"
"timestamp, key, value, headers), constants[i] in constant_slots[i]. Records whose offset is\n"
"below floor are left out. For slotted classes whose __init__ only stores its arguments.\n"
"The instances are not tracked by the cyclic GC: constants must be immutable values.\n"
"None when decode_records would be None; TypeError when a slot is not an object slot of cls.");

static PyObject *
record_objects(PyObject *module, PyObject *args)
{
    (void)module;
    Py_buffer view;
    Py_ssize_t position, end;
    long long count, base_offset, base_timestamp, floor;
    PyObject *append_time, *record_slots, *constant_slots, *constants;
    PyTypeObject *cls;
    if (!PyArg_ParseTuple(args, "y*nnLLLOO!O!O!O!L:record_objects", &view, &position, &end,
                          &count, &base_offset, &base_timestamp, &append_time, &PyType_Type,
                          &cls, &PyTuple_Type, &record_slots, &PyTuple_Type, &constant_slots,
                          &PyTuple_Type, &constants, &floor))
        return NULL;
    Maker maker = {.cls = cls, .floor = (int64_t)floor};
    PyObject *result = NULL;
    if (position < 0 || end < position || end > view.len) {
        PyErr_Format(PyExc_ValueError,
                     "record_objects: position %zd and end %zd must lie within the %zd-byte buffer",
                     position, end, view.len);
        goto done;
    }
    if (PyTuple_GET_SIZE(record_slots) != 5 ||
        PyTuple_GET_SIZE(constant_slots) != PyTuple_GET_SIZE(constants) ||
        PyTuple_GET_SIZE(constants) > MAX_CONSTANTS) {
        PyErr_SetString(PyExc_ValueError,
                        "record_objects: five record slots, and as many constants as their slots");
        goto done;
    }
    for (int i = 0; i < 5; i++)
        if (slot_offset(cls, PyTuple_GET_ITEM(record_slots, i), &maker.record_offsets[i]) < 0)
            goto done;
    maker.constant_count = PyTuple_GET_SIZE(constants);
    for (Py_ssize_t i = 0; i < maker.constant_count; i++) {
        if (slot_offset(cls, PyTuple_GET_ITEM(constant_slots, i), &maker.constant_offsets[i]) < 0)
            goto done;
        maker.constants[i] = PyTuple_GET_ITEM(constants, i);
    }
    result = decode((const unsigned char *)view.buf, position, end, count, (int64_t)base_offset,
                    (int64_t)base_timestamp, append_time, &maker);
done:
    PyBuffer_Release(&view);
    return result;
}

/* --- encoding: record_builder._py_encode_records in C ------------------------------------- */

static inline uint64_t
zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline Py_ssize_t
varint_size(uint64_t v)
{
    Py_ssize_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline unsigned char *
put_varint(unsigned char *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (unsigned char)((v & 0x7F) | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    return p;
}

/* The bytes of a key, value, header name or header value: 0 with *data NULL for None; -1 for
 * anything the fast path leaves to the reference (a bytes subclass, bytearray, memoryview...). */
static inline int
field_bytes(PyObject *o, int str_ok, const char **data, Py_ssize_t *size)
{
    if (o == Py_None) {
        *data = NULL;
        *size = -1;
        return 0;
    }
    if (PyBytes_CheckExact(o)) {
        *data = PyBytes_AS_STRING(o);
        *size = PyBytes_GET_SIZE(o);
        return 0;
    }
    if (str_ok && PyUnicode_CheckExact(o)) {
        *data = PyUnicode_AsUTF8AndSize(o, size); /* cached in the str: no copy on repeat */
        if (*data == NULL) {
            PyErr_Clear(); /* the reference's name.encode() raises this very error */
            return -1;
        }
        return 0;
    }
    return -1;
}

static inline Py_ssize_t
nullable_size(Py_ssize_t size)
{
    return size < 0 ? 1 : varint_size(zigzag(size)) + size;
}

static inline unsigned char *
put_nullable(unsigned char *p, const char *data, Py_ssize_t size)
{
    if (size < 0)
        return put_varint(p, zigzag(-1));
    p = put_varint(p, zigzag(size));
    memcpy(p, data, (size_t)size);
    return p + size;
}

/* One record's fields after its length; written at out when out is not NULL, except a value of
 * at least separate bytes, whose place is left as it is. Returns the size, or -1 when the
 * reference must encode this record. */
static Py_ssize_t
record_body(PyObject *record, Py_ssize_t delta, int64_t base_timestamp, int64_t *timestamp,
            unsigned char *out, Py_ssize_t separate)
{
    if (!PyTuple_CheckExact(record) || PyTuple_GET_SIZE(record) != 4)
        return -1;
    const char *key, *value;
    Py_ssize_t key_size, value_size;
    PyObject *headers = PyTuple_GET_ITEM(record, 2);
    int overflow = 0;
    long long ts = PyLong_Check(PyTuple_GET_ITEM(record, 3))
                       ? PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(record, 3), &overflow)
                       : (overflow = 1, 0);
    int64_t ts_delta;
    if (overflow || (ts == -1 && PyErr_Occurred()) ||
        __builtin_sub_overflow((int64_t)ts, base_timestamp, &ts_delta) ||
        field_bytes(PyTuple_GET_ITEM(record, 0), 0, &key, &key_size) < 0 ||
        field_bytes(PyTuple_GET_ITEM(record, 1), 0, &value, &value_size) < 0 ||
        !(PyTuple_CheckExact(headers) || PyList_CheckExact(headers))) {
        PyErr_Clear();
        return -1;
    }
    *timestamp = (int64_t)ts;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(headers);
    Py_ssize_t size = 1 + varint_size(zigzag(ts_delta)) + varint_size(zigzag(delta)) +
                      nullable_size(key_size) + nullable_size(value_size) +
                      varint_size(zigzag(count));
    unsigned char *p = out;
    if (p != NULL) {
        *p++ = 0; /* attributes */
        p = put_varint(p, zigzag(ts_delta));
        p = put_varint(p, zigzag(delta));
        p = put_nullable(p, key, key_size);
        if (value_size >= separate)
            p = put_varint(p, zigzag(value_size)) + value_size;
        else
            p = put_nullable(p, value, value_size);
        p = put_varint(p, zigzag(count));
    }
    PyObject **items = PySequence_Fast_ITEMS(headers);
    for (Py_ssize_t h = 0; h < count; h++) {
        PyObject *pair = items[h];
        const char *name, *header_value;
        Py_ssize_t name_size, header_size;
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2 ||
            field_bytes(PyTuple_GET_ITEM(pair, 0), 1, &name, &name_size) < 0 ||
            field_bytes(PyTuple_GET_ITEM(pair, 1), 0, &header_value, &header_size) < 0)
            return -1;
        size += nullable_size(name_size) + nullable_size(header_size);
        if (p != NULL) {
            p = put_nullable(p, name, name_size);
            p = put_nullable(p, header_value, header_size);
        }
    }
    return size;
}

PyDoc_STRVAR(encode_records_doc,
"encode_records(records, base_timestamp)\n"
"--\n\n"
"The records area of a batch v2 for records, a list of (key, value, headers, timestamp)\n"
"tuples (offset deltas 0, 1, ...; timestamps as deltas from base_timestamp), and the largest\n"
"timestamp: (bytes, max_timestamp), as record_builder._py_encode_records gives them. None\n"
"when a record is not of the plain shape this encodes (bytes or None keys and values, a\n"
"tuple or list of (str | bytes, bytes | None) tuples for headers, 64-bit timestamps): the\n"
"caller then runs the reference.");

static PyObject *
encode_records(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *records, *base;
    if (!PyArg_ParseTuple(args, "O!O!:encode_records", &PyList_Type, &records, &PyLong_Type, &base))
        return NULL;
    int overflow;
    long long base_timestamp = PyLong_AsLongLongAndOverflow(base, &overflow);
    if (overflow) /* beyond 64 bits: the reference encodes what Python's ints allow */
        Py_RETURN_NONE;
    if (base_timestamp == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(records);
    Py_ssize_t *sizes = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(count ? count : 1));
    if (sizes == NULL)
        return PyErr_NoMemory();
    Py_ssize_t total = 0;
    int64_t max_timestamp = INT64_MIN, timestamp;
    PyObject *body = NULL, *result = NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        sizes[i] = record_body(PyList_GET_ITEM(records, i), i, base_timestamp, &timestamp, NULL, PY_SSIZE_T_MAX);
        if (sizes[i] < 0)
            goto decline;
        total += varint_size(zigzag(sizes[i])) + sizes[i];
        if (timestamp > max_timestamp)
            max_timestamp = timestamp;
    }
    body = PyBytes_FromStringAndSize(NULL, total);
    if (body == NULL)
        goto done;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(body);
    for (Py_ssize_t i = 0; i < count; i++) {
        p = put_varint(p, zigzag(sizes[i]));
        /* The same record as in the sizing pass: the list is ours alone while the GIL is held. */
        record_body(PyList_GET_ITEM(records, i), i, base_timestamp, &timestamp, p, PY_SSIZE_T_MAX);
        p += sizes[i];
    }
    result = Py_BuildValue("(NL)", body, (long long)max_timestamp);
    goto done;
decline:
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(sizes);
    return result;
}

PyDoc_STRVAR(encode_record_parts_doc,
"encode_record_parts(records, base_timestamp, separate)\n"
"--\n\n"
"encode_records, but the records area as a list of buffers whose concatenation is those\n"
"bytes: each value of at least separate bytes is in the list itself (not copied), the bytes\n"
"between such values in bytes objects of their own. (parts, max_timestamp), or None when\n"
"encode_records would be None.");

static PyObject *
encode_record_parts(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *records, *base;
    Py_ssize_t separate;
    if (!PyArg_ParseTuple(args, "O!O!n:encode_record_parts", &PyList_Type, &records, &PyLong_Type, &base,
                          &separate))
        return NULL;
    if (separate < 1) {
        PyErr_SetString(PyExc_ValueError, "encode_record_parts: separate must be at least 1");
        return NULL;
    }
    int overflow;
    long long base_timestamp = PyLong_AsLongLongAndOverflow(base, &overflow);
    if (overflow)
        Py_RETURN_NONE;
    if (base_timestamp == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(records);
    Py_ssize_t *sizes = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(count ? count : 1));
    if (sizes == NULL)
        return PyErr_NoMemory();
    Py_ssize_t copied = 0; /* the bytes that are not a separate value */
    int64_t max_timestamp = INT64_MIN, timestamp;
    unsigned char *scratch = NULL;
    PyObject *parts = NULL, *result = NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *record = PyList_GET_ITEM(records, i);
        sizes[i] = record_body(record, i, base_timestamp, &timestamp, NULL, separate);
        if (sizes[i] < 0)
            goto decline;
        copied += varint_size(zigzag(sizes[i])) + sizes[i];
        PyObject *value = PyTuple_GET_ITEM(record, 1); /* record_body checked the shape */
        if (value != Py_None && PyBytes_GET_SIZE(value) >= separate)
            copied -= PyBytes_GET_SIZE(value);
        if (timestamp > max_timestamp)
            max_timestamp = timestamp;
    }
    /* A record with a separate value is written to a scratch area (as large as the largest
     * record; the value's place is never written), its other bytes copied out from there. */
    Py_ssize_t largest = 0;
    for (Py_ssize_t i = 0; i < count; i++)
        if (sizes[i] > largest)
            largest = sizes[i];
    unsigned char *flat = PyMem_Malloc((size_t)(copied ? copied : 1));
    scratch = PyMem_Malloc((size_t)(largest + 10));
    parts = PyList_New(0);
    if (flat == NULL || scratch == NULL || parts == NULL) {
        PyMem_Free(flat);
        if (parts != NULL)
            PyErr_NoMemory();
        else if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    unsigned char *p = flat, *chunk = flat;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *record = PyList_GET_ITEM(records, i);
        PyObject *value = PyTuple_GET_ITEM(record, 1);
        p = put_varint(p, zigzag(sizes[i]));
        if (value == Py_None || PyBytes_GET_SIZE(value) < separate) {
            record_body(record, i, base_timestamp, &timestamp, p, separate);
            p += sizes[i];
            continue;
        }
        /* Written to the scratch area with a gap for the value, then split around it: the
         * bytes before it here, the value as a part of its own, the bytes after it here. */
        record_body(record, i, base_timestamp, &timestamp, scratch, separate);
        Py_ssize_t value_size = PyBytes_GET_SIZE(value);
        Py_ssize_t key_size = PyTuple_GET_ITEM(record, 0) == Py_None ? -1
                                                                     : PyBytes_GET_SIZE(PyTuple_GET_ITEM(record, 0));
        int64_t ts_delta = (int64_t)timestamp - (int64_t)base_timestamp;
        Py_ssize_t before = 1 + varint_size(zigzag(ts_delta)) + varint_size(zigzag(i)) + nullable_size(key_size) +
                            varint_size(zigzag(value_size));
        memcpy(p, scratch, (size_t)before);
        p += before;
        PyObject *head = PyBytes_FromStringAndSize((const char *)chunk, p - chunk);
        if (head == NULL || PyList_Append(parts, head) < 0 || PyList_Append(parts, value) < 0) {
            Py_XDECREF(head);
            PyMem_Free(flat);
            goto done;
        }
        Py_DECREF(head);
        Py_ssize_t after = sizes[i] - before - value_size;
        memcpy(p, scratch + before + value_size, (size_t)after);
        chunk = p;
        p += after;
    }
    if (p > chunk) {
        PyObject *tail = PyBytes_FromStringAndSize((const char *)chunk, p - chunk);
        if (tail == NULL || PyList_Append(parts, tail) < 0) {
            Py_XDECREF(tail);
            PyMem_Free(flat);
            goto done;
        }
        Py_DECREF(tail);
    }
    PyMem_Free(flat);
    result = Py_BuildValue("(OL)", parts, (long long)max_timestamp);
    goto done;
decline:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(parts);
    PyMem_Free(scratch);
    PyMem_Free(sizes);
    return result;
}

/* --- Kafka's Utils.murmur2, for the Trio producer's keyed partitioning ----------------------- */

PyDoc_STRVAR(murmur2_doc,
"murmur2(key)\n"
"--\n\n"
"Kafka's Utils.murmur2 of key's bytes (seed 0x9747b28c) as an unsigned 32-bit int: what\n"
"client.partitioner._py_murmur2_unsigned computes in Python (~0.75 us for a short key).");

static PyObject *
murmur2(PyObject *module, PyObject *arg)
{
    (void)module;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *data = (const unsigned char *)view.buf;
    const uint32_t m = 0x5bd1e995;
    Py_ssize_t length = view.len;
    uint32_t h = 0x9747b28cu ^ (uint32_t)length;
    Py_ssize_t words = length / 4;
    for (Py_ssize_t i = 0; i < words; i++) {
        const unsigned char *p = data + 4 * i;
        uint32_t k = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
                     ((uint32_t)p[3] << 24);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    Py_ssize_t whole = words * 4;
    switch (length & 3) {
    case 3:
        h ^= (uint32_t)data[whole + 2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)data[whole + 1] << 8;
        /* fall through */
    case 1:
        h ^= (uint32_t)data[whole];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(h);
}

/* --- the Trio producer's per-record futures, out of the cyclic GC's sight ------------------- */

static PyTypeObject *future_cls = NULL; /* a strong reference, set once by future_type() */
static Py_ssize_t future_batch_at, future_index_at;

PyDoc_STRVAR(future_type_doc,
"future_type(cls, batch_slot, index_slot)\n"
"--\n\n"
"Make cls (a slotted class) the type new_future() makes, its batch and index stored in\n"
"batch_slot and index_slot (member descriptors of cls). TypeError when a slot is not an\n"
"object slot of cls.");

static PyObject *
future_type(PyObject *module, PyObject *args)
{
    (void)module;
    PyTypeObject *cls;
    PyObject *batch_slot, *index_slot;
    Py_ssize_t batch_at, index_at;
    if (!PyArg_ParseTuple(args, "O!OO:future_type", &PyType_Type, &cls, &batch_slot, &index_slot))
        return NULL;
    if (slot_offset(cls, batch_slot, &batch_at) < 0 || slot_offset(cls, index_slot, &index_at) < 0)
        return NULL;
    Py_XSETREF(future_cls, (PyTypeObject *)Py_NewRef(cls));
    future_batch_at = batch_at;
    future_index_at = index_at;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(new_future_doc,
"new_future(batch, records, futures, key, value, headers, timestamp)\n"
"--\n\n"
"Append the record (key, value, headers, timestamp) to the list records -- timestamp None\n"
"is now, in epoch milliseconds (Kafka's CreateTime) -- and a new instance of future_type()'s\n"
"class to the list futures, its batch slot batch and its index slot the record's index;\n"
"return the instance. It is made without calling __init__ and is not tracked by the cyclic\n"
"GC: the caller keeps it in futures until nothing that could lead back to it (an exception's\n"
"traceback) can be reached from batch, and calls gc_track() on it before that.");

static PyObject *
new_future(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 7 || !PyList_CheckExact(args[1]) || !PyList_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError,
                        "new_future(batch, records: list, futures: list, key, value, headers, timestamp)");
        return NULL;
    }
    if (future_cls == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "new_future: no class given (future_type)");
        return NULL;
    }
    PyObject *timestamp;
    if (args[6] == Py_None) {
        struct timespec now;
        if (clock_gettime(CLOCK_REALTIME, &now) != 0)
            return PyErr_SetFromErrno(PyExc_OSError);
        timestamp = PyLong_FromLongLong((long long)now.tv_sec * 1000 + now.tv_nsec / 1000000);
        if (timestamp == NULL)
            return NULL;
    } else {
        timestamp = Py_NewRef(args[6]);
    }
    PyObject *record = PyTuple_New(4);
    if (record == NULL) {
        Py_DECREF(timestamp);
        return NULL;
    }
    PyTuple_SET_ITEM(record, 0, Py_NewRef(args[3]));
    PyTuple_SET_ITEM(record, 1, Py_NewRef(args[4]));
    PyTuple_SET_ITEM(record, 2, Py_NewRef(args[5]));
    PyTuple_SET_ITEM(record, 3, timestamp);
    /* Out of the GC's sight at once when it holds nothing the GC tracks (bytes, None, an int,
     * no headers: the common record), as the GC itself would untrack it at its next pass --
     * which then has 350 fewer objects to look at per collection. */
    int atoms = 1;
    for (Py_ssize_t i = 0; i < 3; i++) {
        PyObject *item = PyTuple_GET_ITEM(record, i);
        if (PyObject_IS_GC(item) && PyObject_GC_IsTracked(item))
            atoms = 0;
    }
    if (atoms && PyObject_GC_IsTracked(record))
        PyObject_GC_UnTrack(record);
    PyObject *index = PyLong_FromSsize_t(PyList_GET_SIZE(args[1]));
    PyObject *obj = index == NULL ? NULL : future_cls->tp_alloc(future_cls, 0); /* every slot NULL */
    if (obj == NULL) {
        Py_XDECREF(index);
        Py_DECREF(record);
        return NULL;
    }
    Py_XSETREF(*(PyObject **)((char *)obj + future_batch_at), Py_NewRef(args[0]));
    Py_XSETREF(*(PyObject **)((char *)obj + future_index_at), index);
    /* Tracked, 200,000 futures held by a caller set off full collections over every object
     * the process has: about half of the producer's per-record time at 100-byte records. */
    if (PyObject_GC_IsTracked(obj))
        PyObject_GC_UnTrack(obj);
    int failed = PyList_Append(args[1], record) < 0 || PyList_Append(args[2], obj) < 0;
    Py_DECREF(record);
    if (failed) {
        Py_DECREF(obj);
        return NULL;
    }
    return obj;
}

PyDoc_STRVAR(gc_track_doc,
"gc_track(obj)\n"
"--\n\n"
"Put obj back in the cyclic GC's sight (new_future's instances, once a cycle through them\n"
"could form); nothing for an object already tracked or of a type the GC does not track.");

static PyObject *
gc_track(PyObject *module, PyObject *obj)
{
    (void)module;
    if (PyObject_IS_GC(obj) && !PyObject_GC_IsTracked(obj))
        PyObject_GC_Track(obj);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"walk_records", walk_records, METH_VARARGS, walk_records_doc},
    {"check_batch", check_batch, METH_VARARGS, check_batch_doc},
    {"decode_records", decode_records, METH_VARARGS, decode_records_doc},
    {"record_objects", record_objects, METH_VARARGS, record_objects_doc},
    {"encode_records", encode_records, METH_VARARGS, encode_records_doc},
    {"encode_record_parts", encode_record_parts, METH_VARARGS, encode_record_parts_doc},
    {"murmur2", murmur2, METH_O, murmur2_doc},
    {"future_type", future_type, METH_VARARGS, future_type_doc},
    {"new_future", (PyCFunction)(void (*)(void))new_future, METH_FASTCALL, new_future_doc},
    {"gc_track", gc_track, METH_O, gc_track_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "trikafka.protocol._recordwalk",
    "The native record walk; records.py keeps the pure-Python reference and falls back to it.",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__recordwalk(void)
{
    PyObject *errors = PyImport_ImportModule("trikafka.errors");
    if (errors == NULL)
        return NULL;
    InvalidRecordError = PyObject_GetAttrString(errors, "InvalidRecordError");
    Py_DECREF(errors);
    if (InvalidRecordError == NULL)
        return NULL;
    return PyModule_Create(&module_def);
}
