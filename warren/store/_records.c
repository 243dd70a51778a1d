/*
 * warren.store._records: the compiled twins of the store's record framing
 * (warren/store/record.py append_seq_record, warren/store/message.py append_message_record):
 * the same octets, compared in tests/protocol/test_speedups.py and tests/store/test_record.py.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_cshared.h"

/* CRC-32 as zlib computes it (reflected polynomial 0xEDB88320), eight octets per step. */
static uint32_t crc_table[8][256];

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
}

static uint32_t crc32_update(uint32_t crc, const unsigned char *p, Py_ssize_t n)
{
    crc = ~crc;
    while (n >= 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
        crc = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^ crc_table[5][(lo >> 16) & 0xFF] ^
              crc_table[4][lo >> 24] ^ crc_table[3][hi & 0xFF] ^ crc_table[2][(hi >> 8) & 0xFF] ^
              crc_table[1][(hi >> 16) & 0xFF] ^ crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n-- > 0)
        crc = crc_table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

/*
 * append_seq_record(buf, rtype, seq, rest) -> payload length
 *     One store record (warren/store/record.py) appended to the bytearray buf: type, payload
 *     length, CRC-32 of type, length and payload, then the payload: seq as uint64 and rest.
 *     The same octets as record.append_seq_record's Python (tests/store/test_record.py).
 */
static PyObject *append_seq_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyByteArray_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "append_seq_record expects (bytearray, type, seq, rest)");
        return NULL;
    }
    long rtype = PyLong_AsLong(args[1]);
    unsigned long long seq = PyLong_AsUnsignedLongLong(args[2]);
    if (PyErr_Occurred())
        return NULL;
    if (rtype < 1 || rtype > 255) {
        PyErr_SetString(PyExc_ValueError, "record type must be 1..255");
        return NULL;
    }
    Py_buffer rest;
    if (PyObject_GetBuffer(args[3], &rest, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = 8 + rest.len;
    Py_ssize_t old = PyByteArray_GET_SIZE(args[0]);
    if ((unsigned long long)n > 0xFFFFFFFFULL) {
        PyErr_SetString(PyExc_ValueError, "record payload over 4 GiB");
        goto done;
    }
    if (PyByteArray_Resize(args[0], old + 9 + n) < 0)
        goto done;
    unsigned char *p = (unsigned char *)PyByteArray_AS_STRING(args[0]) + old;
    p[0] = (unsigned char)rtype;
    put32(p + 1, (unsigned long long)n);
    put64(p + 9, seq);
    memcpy(p + 17, rest.buf, rest.len);
    uint32_t crc = crc32_update(0, p, 5);
    crc = crc32_update(crc, p + 9, n);
    put32(p + 5, crc);
    result = PyLong_FromSsize_t(n);
done:
    PyBuffer_Release(&rest);
    return result;
}

/*
 * append_message_record(buf, seq, exchange_ss, routing_key_ss, properties, body) -> payload length
 *     append_seq_record(buf, T_MESSAGE, seq, encode_message_ss(exchange_ss, routing_key_ss,
 *     properties, body)) without the joined record: the parts are framed straight into the
 *     bytearray buf, so a persistent body is copied once on its way to the segment, not twice
 *     (warren/store/message.py has the Python twin; the same octets).
 */
static PyObject *append_message_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6 || !PyByteArray_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError,
                        "append_message_record expects (bytearray, seq, exchange_ss, routing_key_ss, properties, body)");
        return NULL;
    }
    unsigned long long seq = PyLong_AsUnsignedLongLong(args[1]);
    if (seq == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    Py_buffer parts[4];
    int got = 0;
    PyObject *result = NULL;
    for (; got < 4; got++)
        if (PyObject_GetBuffer(args[2 + got], &parts[got], PyBUF_SIMPLE) < 0)
            goto done;
    unsigned long long n = 8 + 4 + (unsigned long long)parts[0].len + parts[1].len + parts[2].len + parts[3].len;
    if (n > 0xFFFFFFFFULL || (unsigned long long)parts[2].len > 0xFFFFFFFFULL) {
        PyErr_SetString(PyExc_ValueError, "record payload over 4 GiB");
        goto done;
    }
    Py_ssize_t old = PyByteArray_GET_SIZE(args[0]);
    if (PyByteArray_Resize(args[0], old + 9 + (Py_ssize_t)n) < 0)
        goto done;
    unsigned char *start = (unsigned char *)PyByteArray_AS_STRING(args[0]) + old, *p = start + 9;
    start[0] = 0x4D; /* T_MESSAGE */
    put32(start + 1, n);
    p = put64(p, seq);
    memcpy(p, parts[0].buf, parts[0].len);
    p += parts[0].len;
    memcpy(p, parts[1].buf, parts[1].len);
    p += parts[1].len;
    p = put32(p, (unsigned long long)parts[2].len);
    memcpy(p, parts[2].buf, parts[2].len);
    p += parts[2].len;
    memcpy(p, parts[3].buf, parts[3].len);
    uint32_t crc = crc32_update(0, start, 5);
    crc = crc32_update(crc, start + 9, (Py_ssize_t)n);
    put32(start + 5, crc);
    result = PyLong_FromUnsignedLongLong(n);
done:
    while (got > 0)
        PyBuffer_Release(&parts[--got]);
    return result;
}

static PyMethodDef methods[] = {
    {"append_seq_record", (PyCFunction)(void (*)(void))append_seq_record, METH_FASTCALL,
     "append_seq_record(buf, rtype, seq, rest) -> int: one store record appended to a bytearray."},
    {"append_message_record", (PyCFunction)(void (*)(void))append_message_record, METH_FASTCALL,
     "append_message_record(buf, seq, exchange_ss, routing_key_ss, properties, body) -> int: a message's store "
     "record framed from its parts into a bytearray."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "warren.store._records", "Compiled record framing of the store (optional).", -1, methods,
};

PyMODINIT_FUNC PyInit__records(void)
{
    crc_init();
    return PyModule_Create(&module);
}
