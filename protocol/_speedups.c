/* kaflet's compiled fast path for the OffsetCommit hot path (issue 17).
 *
 * Each function here has a pure-Python twin that defines its behaviour (protocol/commit_codec.py,
 * protocol/records.py); tests/unit/test_speedups.py checks that both give the same results, or
 * both refuse, on the same inputs. protocol/compiled.py loads this module unless
 * KAFLET_PURE_PYTHON=1, and the broker falls back to the twins when it is not built.
 *
 *   decode_commit_flexible(buf, version)   OffsetCommit v8+ request body -> CommitRequest
 *   decode_commit(buf, version)            the same, older versions by the pure decoder configure() got
 *   encode_commit_response(version, rows)  OffsetCommitResponse body from [(topic, [(partition, error)])]
 *   encode_commit_answer(version, topics, limits, codes, unknown)
 *                                          the same, straight from the decoded request's topics
 *   build_batch(records, timestamp_ms)     an uncompressed v2 batch of (key, value) records, CRC-32C set
 *   batch_size(records)                    its size, without building it
 *   records_max_timestamp(buf, start, end, count, base_ts)
 *                                          the largest record timestamp of a batch's records, which
 *                                          must fill buf[start:end] exactly (ValueError if not)
 *   crc32c(data)                           CRC-32C (Castagnoli), hardware-assisted where the CPU has it
 *   commit_records(group, commits, ...)    the records and applied offsets of accepted commits (shard.py)
 *   parse_request_header(frame, flexible)  request header v1/v2 -> RequestHeader (protocol/header.py)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* -- CRC-32C --------------------------------------------------------------------------- */

static uint32_t crc_table[8][256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = crc_table[0][i];
        for (int t = 1; t < 8; t++) {
            c = crc_table[0][c & 0xff] ^ (c >> 8);
            crc_table[t][i] = c;
        }
    }
}

static uint32_t crc_sw(uint32_t crc, const unsigned char *p, size_t n) {
    crc = ~crc;
    while (n && ((uintptr_t)p & 7)) {
        crc = crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
        n--;
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        w = __builtin_bswap64(w);
#endif
        w ^= crc;
        crc = crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^ crc_table[5][(w >> 16) & 0xff] ^
              crc_table[4][(w >> 24) & 0xff] ^ crc_table[3][(w >> 32) & 0xff] ^ crc_table[2][(w >> 40) & 0xff] ^
              crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) crc = crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_HW_CRC 1
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const unsigned char *p, size_t n) {
    uint64_t c = ~crc;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
    return ~c32;
}
static int use_hw = 0;
#endif

static uint32_t crc32c(const unsigned char *p, size_t n) {
#ifdef HAVE_HW_CRC
    if (use_hw) return crc_hw(0, p, n);
#endif
    return crc_sw(0, p, n);
}

static PyObject *py_crc32c(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    uint32_t c = crc32c((const unsigned char *)view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(c);
}

/* -- OffsetCommit request (v8+, flexible) ------------------------------------------------- */

static PyObject *request_cls, *partition_cls, *codec_error, *decode_fallback;

typedef struct {
    const unsigned char *buf;
    size_t len;
    size_t pos; /* may pass len after skipping tagged fields: every read checks */
} Reader;

static int fail(const char *what) {
    PyErr_Format(codec_error, "OffsetCommit request does not decode: %s", what);
    return -1;
}

/* Unsigned varint of at most 6 bytes (the pure twin's limit: shift > 35 is too long). */
static int uvarint(Reader *r, uint64_t *out) {
    uint64_t result = 0;
    int shift = 0;
    for (;;) {
        if (r->pos >= r->len) return fail("truncated varint");
        unsigned char b = r->buf[r->pos++];
        result |= (uint64_t)(b & 0x7f) << shift;
        if (b < 0x80) {
            *out = result;
            return 0;
        }
        shift += 7;
        if (shift > 35) return fail("varint too long");
    }
}

static int int32_at(Reader *r, int32_t *out) {
    if (r->pos > r->len || r->len - r->pos < 4) return fail("truncated int32");
    const unsigned char *p = r->buf + r->pos;
    *out = (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
    r->pos += 4;
    return 0;
}

static int64_t int64_of(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return (int64_t)v;
}

/* A compact nullable string: *out is a new reference, or Py_None (a new reference too). */
static int compact_string(Reader *r, PyObject **out) {
    uint64_t n;
    if (uvarint(r, &n) < 0) return -1;
    if (n == 0) {
        Py_INCREF(Py_None);
        *out = Py_None;
        return 0;
    }
    n -= 1;
    if (r->pos > r->len || n > r->len - r->pos) return fail("string overruns the request");
    PyObject *s = PyUnicode_DecodeUTF8((const char *)r->buf + r->pos, (Py_ssize_t)n, "strict");
    if (s == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            return fail("string is not UTF-8");
        }
        return -1;
    }
    r->pos += n;
    *out = s;
    return 0;
}

static int skip_tags(Reader *r) {
    uint64_t count, tag, size;
    if (uvarint(r, &count) < 0) return -1;
    for (uint64_t i = 0; i < count; i++) {
        if (uvarint(r, &tag) < 0 || uvarint(r, &size) < 0) return -1;
        r->pos += size; /* size < 2**42: no overflow; a later read past the end fails */
    }
    return 0;
}

/* A tuple subclass (a NamedTuple) made from the items of `items` without calling Python code. */
static PyObject *named(PyObject *cls, PyObject *items) {
    if (items == NULL) return NULL;
    PyObject *args = PyTuple_Pack(1, items);
    Py_DECREF(items);
    if (args == NULL) return NULL;
    PyObject *out = PyTuple_Type.tp_new((PyTypeObject *)cls, args, NULL);
    Py_DECREF(args);
    return out;
}

static PyObject *py_decode_commit_flexible(PyObject *self, PyObject *args) {
    Py_buffer view;
    int version;
    if (!PyArg_ParseTuple(args, "y*i", &view, &version)) return NULL;
    if (request_cls == NULL) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_RuntimeError, "configure() was not called");
        return NULL;
    }
    Reader r = {(const unsigned char *)view.buf, (size_t)view.len, 0};
    PyObject *group = NULL, *member = NULL, *instance = NULL, *topics = NULL, *name = NULL, *parts = NULL;
    PyObject *result = NULL;
    int32_t generation;
    uint64_t count;
    if (compact_string(&r, &group) < 0) goto done;
    if (int32_at(&r, &generation) < 0) goto done;
    if (compact_string(&r, &member) < 0) goto done;
    if (compact_string(&r, &instance) < 0) goto done;
    if (uvarint(&r, &count) < 0) goto done;
    if (count == 0) {
        fail("null array");
        goto done;
    }
    if (group == Py_None || member == Py_None) {
        fail("non-nullable field group_id or member_id was serialized as null");
        goto done;
    }
    topics = PyList_New(0);
    if (topics == NULL) goto done;
    for (uint64_t t = 0; t < count - 1; t++) {
        uint64_t n;
        if (compact_string(&r, &name) < 0) goto done;
        if (name == Py_None) {
            fail("null topic name");
            goto done;
        }
        if (uvarint(&r, &n) < 0) goto done;
        if (n == 0) {
            fail("null array");
            goto done;
        }
        parts = PyList_New(0);
        if (parts == NULL) goto done;
        for (uint64_t i = 0; i < n - 1; i++) {
            if (r.pos > r.len || r.len - r.pos < 16) {
                fail("truncated partition");
                goto done;
            }
            const unsigned char *p = r.buf + r.pos;
            int32_t partition = (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
            int64_t offset = int64_of(p + 4);
            int32_t epoch = (int32_t)(((uint32_t)p[12] << 24) | ((uint32_t)p[13] << 16) | ((uint32_t)p[14] << 8) | p[15]);
            r.pos += 16;
            PyObject *metadata;
            if (compact_string(&r, &metadata) < 0) goto done;
            if (skip_tags(&r) < 0) {
                Py_DECREF(metadata);
                goto done;
            }
            PyObject *cp = named(partition_cls, Py_BuildValue("(iLiiN)", partition, (long long)offset, epoch, -1, metadata));
            if (cp == NULL) goto done;
            int rc = PyList_Append(parts, cp);
            Py_DECREF(cp);
            if (rc < 0) goto done;
        }
        if (skip_tags(&r) < 0) goto done;
        PyObject *topic = PyTuple_Pack(2, name, parts);
        Py_CLEAR(name);
        Py_CLEAR(parts);
        if (topic == NULL) goto done;
        int rc = PyList_Append(topics, topic);
        Py_DECREF(topic);
        if (rc < 0) goto done;
    }
    if (skip_tags(&r) < 0) goto done;
    if (r.pos > r.len) {
        fail("OffsetCommit request overruns its frame");
        goto done;
    }
    result = named(request_cls, Py_BuildValue("(OiOOiOi)", group, generation, member, instance, -1, topics, version));
done:
    PyBuffer_Release(&view);
    Py_XDECREF(group);
    Py_XDECREF(member);
    Py_XDECREF(instance);
    Py_XDECREF(topics);
    Py_XDECREF(name);
    Py_XDECREF(parts);
    return result;
}

/* decode_commit(body, version): v8+ here, older versions by the pure decoder given to configure(). */
static PyObject *py_decode_commit(PyObject *self, PyObject *args) {
    PyObject *body;
    int version;
    if (!PyArg_ParseTuple(args, "Oi", &body, &version)) return NULL;
    if (version >= 8) return py_decode_commit_flexible(self, args);
    if (decode_fallback == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "configure() was not given the pure decoder");
        return NULL;
    }
    return PyObject_CallObject(decode_fallback, args);
}

/* -- OffsetCommit response ---------------------------------------------------------------- */

typedef struct {
    unsigned char *p;
    size_t len, cap;
} Out;

static int grow(Out *o, size_t more) {
    if (o->len + more <= o->cap) return 0;
    size_t cap = o->cap ? o->cap : 256;
    while (cap < o->len + more) cap *= 2;
    unsigned char *p = PyMem_Realloc(o->p, cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->p = p;
    o->cap = cap;
    return 0;
}

static int put(Out *o, const void *src, size_t n) {
    if (grow(o, n) < 0) return -1;
    memcpy(o->p + o->len, src, n);
    o->len += n;
    return 0;
}

static int put_uvarint(Out *o, uint64_t v) {
    unsigned char tmp[10];
    int n = 0;
    while (v > 0x7f) {
        tmp[n++] = (unsigned char)((v & 0x7f) | 0x80);
        v >>= 7;
    }
    tmp[n++] = (unsigned char)v;
    return put(o, tmp, (size_t)n);
}

static int put_be(Out *o, uint64_t v, int bytes) {
    unsigned char tmp[8];
    for (int i = bytes - 1; i >= 0; i--) {
        tmp[i] = (unsigned char)(v & 0xff);
        v >>= 8;
    }
    return put(o, tmp, (size_t)bytes);
}

/* A topic name in a request or answer: COMPACT_STRING when flexible, else STRING (int16 length). */
static int put_name(Out *o, PyObject *name, int flexible) {
    Py_ssize_t nlen;
    const char *raw = PyUnicode_AsUTF8AndSize(name, &nlen);
    if (raw == NULL) return -1;
    if (flexible) {
        if (put_uvarint(o, (uint64_t)nlen + 1) < 0) return -1;
    } else {
        if (nlen > 32767) {
            PyErr_SetString(PyExc_OverflowError, "topic name too long");
            return -1;
        }
        if (put_be(o, (uint64_t)nlen, 2) < 0) return -1;
    }
    return put(o, raw, (size_t)nlen);
}

static int long_in(PyObject *obj, long long lo, long long hi, long long *out) {
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < lo || v > hi) {
        PyErr_SetString(PyExc_OverflowError, "value out of range");
        return -1;
    }
    *out = v;
    return 0;
}

static PyObject *py_encode_commit_response(PyObject *self, PyObject *args) {
    int version;
    PyObject *rows;
    if (!PyArg_ParseTuple(args, "iO", &version, &rows)) return NULL;
    PyObject *seq = PySequence_Fast(rows, "rows must be a sequence");
    if (seq == NULL) return NULL;
    int flexible = version >= 8;
    Out o = {NULL, 0, 0};
    PyObject *result = NULL;
    Py_ssize_t nt = PySequence_Fast_GET_SIZE(seq);
    if (version >= 3 && put_be(&o, 0, 4) < 0) goto done;
    if ((flexible ? put_uvarint(&o, (uint64_t)nt + 1) : put_be(&o, (uint64_t)nt, 4)) < 0) goto done;
    for (Py_ssize_t t = 0; t < nt; t++) {
        PyObject *row = PySequence_Fast_GET_ITEM(seq, t);
        PyObject *name, *parts;
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 2) {
            PyErr_SetString(PyExc_TypeError, "a row is (topic, [(partition, error)])");
            goto done;
        }
        name = PyTuple_GET_ITEM(row, 0);
        parts = PyTuple_GET_ITEM(row, 1);
        if (put_name(&o, name, flexible) < 0) goto done;
        PyObject *pseq = PySequence_Fast(parts, "partitions must be a sequence");
        if (pseq == NULL) goto done;
        Py_ssize_t np = PySequence_Fast_GET_SIZE(pseq);
        if ((flexible ? put_uvarint(&o, (uint64_t)np + 1) : put_be(&o, (uint64_t)np, 4)) < 0) {
            Py_DECREF(pseq);
            goto done;
        }
        for (Py_ssize_t i = 0; i < np; i++) {
            PyObject *pe = PySequence_Fast_GET_ITEM(pseq, i);
            long long partition, error;
            if (!PyTuple_Check(pe) || PyTuple_GET_SIZE(pe) != 2 || long_in(PyTuple_GET_ITEM(pe, 0), INT32_MIN, INT32_MAX, &partition) < 0 ||
                long_in(PyTuple_GET_ITEM(pe, 1), INT16_MIN, INT16_MAX, &error) < 0) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "a partition is (partition, error)");
                Py_DECREF(pseq);
                goto done;
            }
            if (put_be(&o, (uint64_t)partition, 4) < 0 || put_be(&o, (uint64_t)error, 2) < 0 || (flexible && put_be(&o, 0, 1) < 0)) {
                Py_DECREF(pseq);
                goto done;
            }
        }
        Py_DECREF(pseq);
        if (flexible && put_be(&o, 0, 1) < 0) goto done;
    }
    if (flexible && put_be(&o, 0, 1) < 0) goto done;
    result = PyBytes_FromStringAndSize((const char *)o.p, (Py_ssize_t)o.len);
done:
    PyMem_Free(o.p);
    Py_DECREF(seq);
    return result;
}

/* The answer to a decoded request straight from its topics (name, [CommitPartition]): a
 * partition at or past its topic's limit (the partition count the handler saw) gets `unknown`
 * (OC-2), the others the next of `codes` in order, or `codes` itself when it is an int. */
static PyObject *py_encode_commit_answer(PyObject *self, PyObject *args) {
    int version;
    PyObject *topics, *limits, *codes, *unknown_obj;
    if (!PyArg_ParseTuple(args, "iO!O!OO", &version, &PyList_Type, &topics, &PyList_Type, &limits, &codes, &unknown_obj)) return NULL;
    long long unknown, single = 0;
    int per_commit = PyList_Check(codes);
    if (long_in(unknown_obj, INT16_MIN, INT16_MAX, &unknown) < 0) return NULL;
    if (!per_commit && long_in(codes, INT16_MIN, INT16_MAX, &single) < 0) return NULL;
    Py_ssize_t nt = PyList_GET_SIZE(topics), next_code = 0;
    if (PyList_GET_SIZE(limits) != nt) {
        PyErr_SetString(PyExc_ValueError, "one limit per topic");
        return NULL;
    }
    int flexible = version >= 8;
    Out o = {NULL, 0, 0};
    PyObject *result = NULL;
    if (version >= 3 && put_be(&o, 0, 4) < 0) goto done;
    if ((flexible ? put_uvarint(&o, (uint64_t)nt + 1) : put_be(&o, (uint64_t)nt, 4)) < 0) goto done;
    for (Py_ssize_t t = 0; t < nt; t++) {
        PyObject *row = PyList_GET_ITEM(topics, t);
        long long limit;
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 2 || !PyList_Check(PyTuple_GET_ITEM(row, 1))) {
            PyErr_SetString(PyExc_TypeError, "a topic is (name, [partition tuples])");
            goto done;
        }
        if (long_in(PyList_GET_ITEM(limits, t), 0, INT32_MAX, &limit) < 0) goto done;
        PyObject *parts = PyTuple_GET_ITEM(row, 1);
        if (put_name(&o, PyTuple_GET_ITEM(row, 0), flexible) < 0) goto done;
        Py_ssize_t np = PyList_GET_SIZE(parts);
        if ((flexible ? put_uvarint(&o, (uint64_t)np + 1) : put_be(&o, (uint64_t)np, 4)) < 0) goto done;
        for (Py_ssize_t i = 0; i < np; i++) {
            PyObject *cp = PyList_GET_ITEM(parts, i);
            long long partition, error;
            if (!PyTuple_Check(cp) || PyTuple_GET_SIZE(cp) < 1) {
                PyErr_SetString(PyExc_TypeError, "a partition is a tuple");
                goto done;
            }
            if (long_in(PyTuple_GET_ITEM(cp, 0), INT32_MIN, INT32_MAX, &partition) < 0) goto done;
            if (partition < 0 || partition >= limit) {
                error = unknown;
            } else if (!per_commit) {
                error = single;
            } else {
                if (next_code >= PyList_GET_SIZE(codes)) {
                    PyErr_SetString(PyExc_ValueError, "fewer codes than known partitions");
                    goto done;
                }
                if (long_in(PyList_GET_ITEM(codes, next_code++), INT16_MIN, INT16_MAX, &error) < 0) goto done;
            }
            if (put_be(&o, (uint64_t)partition, 4) < 0 || put_be(&o, (uint64_t)error, 2) < 0 || (flexible && put_be(&o, 0, 1) < 0)) goto done;
        }
        if (flexible && put_be(&o, 0, 1) < 0) goto done;
    }
    if (per_commit && next_code != PyList_GET_SIZE(codes)) {
        PyErr_SetString(PyExc_ValueError, "more codes than known partitions");
        goto done;
    }
    if (flexible && put_be(&o, 0, 1) < 0) goto done;
    result = PyBytes_FromStringAndSize((const char *)o.p, (Py_ssize_t)o.len);
done:
    PyMem_Free(o.p);
    return result;
}

/* -- record batches ----------------------------------------------------------------------- */

#define HEADER_SIZE 61
#define CRC_OFFSET 17
#define CRC_START 21

static size_t varint_len(uint64_t v) {
    size_t n = 1;
    while (v > 0x7f) {
        v >>= 7;
        n++;
    }
    return n;
}

static unsigned char *write_varint(unsigned char *p, uint64_t v) {
    while (v > 0x7f) {
        *p++ = (unsigned char)((v & 0x7f) | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    return p;
}

/* The key or value of a record: bytes or None (-1). Anything else is a TypeError, which the
 * Python wrapper answers by building the batch itself. */
static int field(PyObject *obj, const char **data, Py_ssize_t *len) {
    if (obj == Py_None) {
        *data = NULL;
        *len = -1;
        return 0;
    }
    if (!PyBytes_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "record keys and values are bytes or None");
        return -1;
    }
    *data = PyBytes_AS_STRING(obj);
    *len = PyBytes_GET_SIZE(obj);
    return 0;
}

/* The record's body length (attributes .. header count) for offset delta i. */
static size_t record_body(Py_ssize_t i, Py_ssize_t klen, Py_ssize_t vlen) {
    size_t body = 3 + varint_len((uint64_t)i << 1);
    body += klen < 0 ? 1 : varint_len((uint64_t)klen << 1) + (size_t)klen;
    body += vlen < 0 ? 1 : varint_len((uint64_t)vlen << 1) + (size_t)vlen;
    return body;
}

static int record_fields(PyObject *item, const char **k, Py_ssize_t *kl, const char **v, Py_ssize_t *vl) {
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
        PyErr_SetString(PyExc_TypeError, "a record is (key, value)");
        return -1;
    }
    if (field(PyTuple_GET_ITEM(item, 0), k, kl) < 0 || field(PyTuple_GET_ITEM(item, 1), v, vl) < 0) return -1;
    return 0;
}

static int batch_total(PyObject *seq, size_t *total) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    size_t size = HEADER_SIZE;
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *k, *v;
        Py_ssize_t kl, vl;
        if (record_fields(PySequence_Fast_GET_ITEM(seq, i), &k, &kl, &v, &vl) < 0) return -1;
        size_t body = record_body(i, kl, vl);
        size += varint_len((uint64_t)body << 1) + body;
    }
    *total = size;
    return 0;
}

static PyObject *py_batch_size(PyObject *self, PyObject *records) {
    PyObject *seq = PySequence_Fast(records, "records must be a sequence");
    if (seq == NULL) return NULL;
    size_t size;
    int rc = batch_total(seq, &size);
    Py_DECREF(seq);
    if (rc < 0) return NULL;
    return PyLong_FromSize_t(size);
}

static unsigned char *be(unsigned char *p, uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; i--) {
        p[i] = (unsigned char)(v & 0xff);
        v >>= 8;
    }
    return p + bytes;
}

static PyObject *py_build_batch(PyObject *self, PyObject *args) {
    PyObject *records;
    long long ts;
    if (!PyArg_ParseTuple(args, "OL", &records, &ts)) return NULL;
    PyObject *seq = PySequence_Fast(records, "records must be a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    size_t size;
    if (n == 0) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "a batch needs at least one record");
        return NULL;
    }
    if (batch_total(seq, &size) < 0 || size - 12 > INT32_MAX) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_OverflowError, "batch too large");
        Py_DECREF(seq);
        return NULL;
    }
    PyObject *out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (out == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    unsigned char *base = (unsigned char *)PyByteArray_AS_STRING(out);
    unsigned char *p = base;
    p = be(p, 0, 8);                          /* base offset */
    p = be(p, (uint64_t)(size - 12), 4);      /* batch length */
    p = be(p, 0, 4);                          /* partition leader epoch */
    *p++ = 2;                                 /* magic */
    p = be(p, 0, 4);                          /* crc, below */
    p = be(p, 0, 2);                          /* attributes */
    p = be(p, (uint64_t)(n - 1), 4);          /* last offset delta */
    p = be(p, (uint64_t)ts, 8);               /* first timestamp */
    p = be(p, (uint64_t)ts, 8);               /* max timestamp */
    p = be(p, (uint64_t)(int64_t)-1, 8);      /* producer id */
    p = be(p, (uint64_t)(int16_t)-1, 2);      /* producer epoch */
    p = be(p, (uint64_t)(int32_t)-1, 4);      /* base sequence */
    p = be(p, (uint64_t)n, 4);                /* record count */
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *k, *v;
        Py_ssize_t kl, vl;
        record_fields(PySequence_Fast_GET_ITEM(seq, i), &k, &kl, &v, &vl); /* checked by batch_total */
        size_t body = record_body(i, kl, vl);
        p = write_varint(p, (uint64_t)body << 1);
        *p++ = 0; /* attributes */
        *p++ = 0; /* timestamp delta */
        p = write_varint(p, (uint64_t)i << 1);
        if (kl < 0) {
            *p++ = 1;
        } else {
            p = write_varint(p, (uint64_t)kl << 1);
            memcpy(p, k, (size_t)kl);
            p += kl;
        }
        if (vl < 0) {
            *p++ = 1;
        } else {
            p = write_varint(p, (uint64_t)vl << 1);
            memcpy(p, v, (size_t)vl);
            p += vl;
        }
        *p++ = 0; /* no headers */
    }
    Py_DECREF(seq);
    be(base + CRC_OFFSET, crc32c(base + CRC_START, size - CRC_START), 4);
    return out;
}

/* -- reading a batch's records (Kafka's LogValidator reads every record of a produced batch) -- */

/* A zigzag varint of at most `max_bytes` bytes (5: Kafka's readVarint, an int32; 10: readVarlong)
 * at *p, below `end`. 0, or -1 when it runs past `end` or over `max_bytes`. */
static int read_zigzag(const unsigned char **p, const unsigned char *end, int max_bytes, int64_t *out) {
    uint64_t raw = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (*p >= end) return -1;
        unsigned char b = *(*p)++;
        raw |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            if (max_bytes == 5) {
                uint32_t u = (uint32_t)raw; /* Java's int arithmetic keeps the low 32 bits */
                *out = (int32_t)((u >> 1) ^ (0u - (u & 1)));
            } else {
                *out = (int64_t)((raw >> 1) ^ (0 - (raw & 1)));
            }
            return 0;
        }
    }
    return -1;
}

/* The largest record timestamp (base + timestampDelta, at least -1) of `count` records that fill
 * buf[start:end] exactly; NULL with ValueError(why) when they do not. */
static PyObject *py_records_max_timestamp(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, end;
    long long count, base;
    if (!PyArg_ParseTuple(args, "y*nnLL", &view, &start, &end, &count, &base)) return NULL;
    const char *why = NULL;
    int64_t max_ts = -1;
    if (start < 0 || end < start || end > view.len) {
        why = "record range outside the buffer";
        goto done;
    }
    const unsigned char *p = (const unsigned char *)view.buf + start, *stop = (const unsigned char *)view.buf + end;
    for (long long i = 0; i < count; i++) {
        int64_t length, ts_delta, ignored, key_len, value_len, headers;
        if (read_zigzag(&p, stop, 5, &length) < 0 || length < 0 || length > stop - p) {
            why = "Invalid record size";
            goto done;
        }
        const unsigned char *rec_end = p + length;
        if (p >= rec_end) {
            why = "Found invalid record structure";
            goto done;
        }
        p++; /* attributes */
        if (read_zigzag(&p, rec_end, 10, &ts_delta) < 0 || read_zigzag(&p, rec_end, 5, &ignored) < 0 ||
            read_zigzag(&p, rec_end, 5, &key_len) < 0 || (key_len > 0 && key_len > rec_end - p)) {
            why = "Found invalid record structure";
            goto done;
        }
        if (key_len > 0) p += key_len;
        if (read_zigzag(&p, rec_end, 5, &value_len) < 0 || (value_len > 0 && value_len > rec_end - p)) {
            why = "Found invalid record structure";
            goto done;
        }
        if (value_len > 0) p += value_len;
        if (read_zigzag(&p, rec_end, 5, &headers) < 0) {
            why = "Found invalid record structure";
            goto done;
        }
        if (headers < 0) {
            why = "Found invalid number of record headers";
            goto done;
        }
        for (int64_t h = 0; h < headers; h++) {
            int64_t hk, hv;
            if (read_zigzag(&p, rec_end, 5, &hk) < 0 || hk < 0 || hk > rec_end - p) {
                why = "Found invalid record structure";
                goto done;
            }
            p += hk;
            if (read_zigzag(&p, rec_end, 5, &hv) < 0 || (hv > 0 && hv > rec_end - p)) {
                why = "Found invalid record structure";
                goto done;
            }
            if (hv > 0) p += hv;
        }
        if (p != rec_end) {
            why = "Invalid record size: the record's fields do not fill it";
            goto done;
        }
        int64_t ts = (int64_t)((uint64_t)base + (uint64_t)ts_delta); /* wraps as Java's long does */
        if (ts > max_ts) max_ts = ts;
    }
    if (p != stop) why = "Incorrect declared batch size, records still remaining in file";
done:
    PyBuffer_Release(&view);
    if (why != NULL) {
        PyErr_SetString(PyExc_ValueError, why);
        return NULL;
    }
    return PyLong_FromLongLong(max_ts);
}

/* -- OffsetCommit records (storage/offsets_records.py's key type 1 and value v1/v3) ------- */

/* A Kafka STRING (int16 length, UTF-8); 0 when it does not fit (the caller takes the pure path). */
static int put_string16(Out *o, PyObject *str) {
    Py_ssize_t n;
    const char *raw = PyUnicode_AsUTF8AndSize(str, &n);
    if (raw == NULL) return -1;
    if (n > 32767) return 0;
    if (put_be(o, (uint64_t)n, 2) < 0 || put(o, raw, (size_t)n) < 0) return -1;
    return 1;
}

static PyObject *out_bytes(Out *o) {
    PyObject *b = PyBytes_FromStringAndSize((const char *)o->p, (Py_ssize_t)o->len);
    o->len = 0;
    return b;
}

/* commit_records(group, commits, now, expire, half_meta) -> (records, applied) for commits
 * [(topic, (partition, offset, leader epoch, commit timestamp, metadata))], all accepted: records
 * [(key, value)], applied [(topic, partition, value)]. None when the pure loop must decide
 * (metadata over half the limit, whose UTF-16 length decides OC-6; a string too long for a
 * record field). */
static PyObject *py_commit_records(PyObject *self, PyObject *args) {
    PyObject *group, *commits;
    long long now, expire;
    Py_ssize_t half_meta;
    if (!PyArg_ParseTuple(args, "UO!LLn", &group, &PyList_Type, &commits, &now, &expire, &half_meta)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(commits);
    PyObject *records = PyList_New(n), *applied = PyList_New(n), *result = NULL;
    Out o = {NULL, 0, 0};
    if (records == NULL || applied == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(commits, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) goto bail;
        PyObject *topic = PyTuple_GET_ITEM(item, 0), *c = PyTuple_GET_ITEM(item, 1);
        if (!PyUnicode_Check(topic) || !PyTuple_Check(c) || PyTuple_GET_SIZE(c) != 5) goto bail;
        PyObject *metadata = PyTuple_GET_ITEM(c, 4);
        if (metadata != Py_None && (!PyUnicode_Check(metadata) || PyUnicode_GET_LENGTH(metadata) > half_meta)) goto bail;
        long long partition, offset, epoch, ts;
        if (long_in(PyTuple_GET_ITEM(c, 0), INT32_MIN, INT32_MAX, &partition) < 0 ||
            long_in(PyTuple_GET_ITEM(c, 1), INT64_MIN, INT64_MAX, &offset) < 0 ||
            long_in(PyTuple_GET_ITEM(c, 2), INT32_MIN, INT32_MAX, &epoch) < 0 ||
            long_in(PyTuple_GET_ITEM(c, 3), INT64_MIN, INT64_MAX, &ts) < 0) {
            PyErr_Clear();
            goto bail;
        }
        if (ts == -1) ts = now;
        int rc;
        /* key: type 1, group, topic, partition */
        o.len = 0;
        if (put_be(&o, 1, 2) < 0) goto done;
        if ((rc = put_string16(&o, group)) <= 0 || (rc = put_string16(&o, topic)) <= 0) {
            if (rc < 0) goto done;
            goto bail;
        }
        if (put_be(&o, (uint64_t)partition, 4) < 0) goto done;
        PyObject *key = out_bytes(&o);
        if (key == NULL) goto done;
        /* value: v1 with an expire timestamp, else v3 */
        int has_meta = metadata != Py_None && PyUnicode_GET_LENGTH(metadata) > 0;
        rc = 1;
        if (expire != -1) {
            if (put_be(&o, 1, 2) < 0 || put_be(&o, (uint64_t)offset, 8) < 0) rc = -1;
            else if (has_meta) rc = put_string16(&o, metadata);
            else if (put_be(&o, 0, 2) < 0) rc = -1;
            if (rc > 0 && (put_be(&o, (uint64_t)ts, 8) < 0 || put_be(&o, (uint64_t)expire, 8) < 0)) rc = -1;
        } else {
            if (put_be(&o, 3, 2) < 0 || put_be(&o, (uint64_t)offset, 8) < 0 || put_be(&o, (uint64_t)epoch, 4) < 0) rc = -1;
            else if (has_meta) rc = put_string16(&o, metadata);
            else if (put_be(&o, 0, 2) < 0) rc = -1;
            if (rc > 0 && put_be(&o, (uint64_t)ts, 8) < 0) rc = -1;
        }
        if (rc <= 0) {
            Py_DECREF(key);
            if (rc < 0) goto done;
            goto bail;
        }
        PyObject *value = out_bytes(&o);
        if (value == NULL) {
            Py_DECREF(key);
            goto done;
        }
        PyObject *record = PyTuple_Pack(2, key, value);
        PyObject *applied_one = Py_BuildValue("(OOO)", topic, PyTuple_GET_ITEM(c, 0), value);
        Py_DECREF(key);
        Py_DECREF(value);
        if (record == NULL || applied_one == NULL) {
            Py_XDECREF(record);
            Py_XDECREF(applied_one);
            goto done;
        }
        PyList_SET_ITEM(records, i, record);
        PyList_SET_ITEM(applied, i, applied_one);
    }
    result = PyTuple_Pack(2, records, applied);
    goto done;
bail:
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyMem_Free(o.p);
    Py_XDECREF(records);
    Py_XDECREF(applied);
    return result;
}

/* -- request header (v1, or v2 when flexible) --------------------------------------------- */

static PyObject *header_cls, *header_error;

static PyObject *header_fail(const char *what) {
    PyErr_SetString(header_error, what);
    return NULL;
}

/* The header's unsigned varint: at most 5 bytes (the pure twin's shift > 28 limit). */
static int header_uvarint(const unsigned char *buf, size_t len, size_t *pos, uint64_t *out) {
    uint64_t result = 0;
    int shift = 0;
    for (;;) {
        if (*pos >= len) {
            header_fail("truncated varint");
            return -1;
        }
        unsigned char b = buf[(*pos)++];
        result |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = result;
            return 0;
        }
        shift += 7;
        if (shift > 28) {
            header_fail("varint too long");
            return -1;
        }
    }
}

static PyObject *py_parse_request_header(PyObject *self, PyObject *args) {
    Py_buffer view;
    int flexible;
    if (!PyArg_ParseTuple(args, "y*p", &view, &flexible)) return NULL;
    PyObject *result = NULL, *client_id = NULL;
    const unsigned char *b = (const unsigned char *)view.buf;
    size_t len = (size_t)view.len, pos = 10;
    if (header_cls == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "configure_header() was not called");
        goto done;
    }
    if (len < 10) {
        header_fail("frame shorter than a request header");
        goto done;
    }
    int api_key = (int16_t)((b[0] << 8) | b[1]);
    int api_version = (int16_t)((b[2] << 8) | b[3]);
    int32_t corr = (int32_t)(((uint32_t)b[4] << 24) | ((uint32_t)b[5] << 16) | ((uint32_t)b[6] << 8) | b[7]);
    int clen = (int16_t)((b[8] << 8) | b[9]);
    if (clen < 0) {
        if (clen != -1) {
            header_fail("negative client id length");
            goto done;
        }
        Py_INCREF(Py_None);
        client_id = Py_None;
    } else {
        if (pos + (size_t)clen > len) {
            header_fail("truncated client id");
            goto done;
        }
        client_id = PyUnicode_DecodeUTF8((const char *)b + pos, clen, "strict");
        if (client_id == NULL) {
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                PyErr_Clear();
                header_fail("client id is not UTF-8");
            }
            goto done;
        }
        pos += (size_t)clen;
    }
    if (flexible) {
        uint64_t count, tag, size;
        if (header_uvarint(b, len, &pos, &count) < 0) goto done;
        for (uint64_t i = 0; i < count; i++) {
            if (header_uvarint(b, len, &pos, &tag) < 0 || header_uvarint(b, len, &pos, &size) < 0) goto done;
            pos += size;
            if (pos > len) {
                header_fail("truncated tagged field");
                goto done;
            }
        }
    }
    result = named(header_cls, Py_BuildValue("(iiiOn)", api_key, api_version, corr, client_id, (Py_ssize_t)pos));
done:
    Py_XDECREF(client_id);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *py_configure_header(PyObject *self, PyObject *args) {
    PyObject *cls, *err;
    if (!PyArg_ParseTuple(args, "OO", &cls, &err)) return NULL;
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &PyTuple_Type) || !PyType_Check(err)) {
        PyErr_SetString(PyExc_TypeError, "configure_header(header tuple type, error type)");
        return NULL;
    }
    Py_INCREF(cls);
    Py_INCREF(err);
    Py_XSETREF(header_cls, cls);
    Py_XSETREF(header_error, err);
    Py_RETURN_NONE;
}

/* -- module ------------------------------------------------------------------------------- */

static PyObject *py_configure(PyObject *self, PyObject *args) {
    PyObject *req, *part, *err, *fallback = NULL;
    if (!PyArg_ParseTuple(args, "OOO|O", &req, &part, &err, &fallback)) return NULL;
    if (!PyType_Check(req) || !PyType_IsSubtype((PyTypeObject *)req, &PyTuple_Type) || !PyType_Check(part) ||
        !PyType_IsSubtype((PyTypeObject *)part, &PyTuple_Type) || !PyType_Check(err)) {
        PyErr_SetString(PyExc_TypeError, "configure(request tuple type, partition tuple type, error type)");
        return NULL;
    }
    Py_INCREF(req);
    Py_INCREF(part);
    Py_INCREF(err);
    Py_XSETREF(request_cls, req);
    Py_XSETREF(partition_cls, part);
    Py_XSETREF(codec_error, err);
    if (fallback != NULL) {
        Py_INCREF(fallback);
        Py_XSETREF(decode_fallback, fallback);
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", py_configure, METH_VARARGS, "configure(CommitRequest, CommitPartition, CodecError)"},
    {"decode_commit_flexible", py_decode_commit_flexible, METH_VARARGS, "An OffsetCommit v8+ request body."},
    {"decode_commit", py_decode_commit, METH_VARARGS, "An OffsetCommit request body of any version."},
    {"encode_commit_response", py_encode_commit_response, METH_VARARGS, "An OffsetCommitResponse body."},
    {"encode_commit_answer", py_encode_commit_answer, METH_VARARGS, "encode_commit_answer(version, topics, limits, codes, unknown)"},
    {"build_batch", py_build_batch, METH_VARARGS, "build_batch(records, timestamp_ms) -> bytearray"},
    {"batch_size", py_batch_size, METH_O, "The size of build_batch(records)."},
    {"records_max_timestamp", py_records_max_timestamp, METH_VARARGS, "records_max_timestamp(buf, start, end, count, base_ts)"},
    {"crc32c", py_crc32c, METH_O, "CRC-32C of a buffer."},
    {"commit_records", py_commit_records, METH_VARARGS, "commit_records(group, commits, now, expire, half_meta)"},
    {"configure_header", py_configure_header, METH_VARARGS, "configure_header(RequestHeader, HeaderError)"},
    {"parse_request_header", py_parse_request_header, METH_VARARGS, "parse_request_header(frame, flexible) -> RequestHeader"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "protocol._speedups", NULL, -1, methods};

#ifndef KAFLET_SOURCE_DIGEST
#define KAFLET_SOURCE_DIGEST ""
#endif

PyMODINIT_FUNC PyInit__speedups(void) {
    crc_init();
#ifdef HAVE_HW_CRC
    __builtin_cpu_init();
    use_hw = __builtin_cpu_supports("sse4.2");
#endif
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    /* setup.py passes the CRC-32 of this file: protocol/compiled.py compares it with the source beside it */
    PyModule_AddStringConstant(m, "source_digest", KAFLET_SOURCE_DIGEST);
#ifdef HAVE_HW_CRC
    PyModule_AddStringConstant(m, "crc32c_impl", use_hw ? "sse4.2" : "table");
#else
    PyModule_AddStringConstant(m, "crc32c_impl", "table");
#endif
    return m;
}
