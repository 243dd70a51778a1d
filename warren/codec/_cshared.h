/*
 * What Warren's C accelerators share (warren/codec/_speedups.c, warren/store/_records.c,
 * warren/broker/_messages.c): big-endian reads and writes, and where a __slots__ attribute sits
 * in an object. Each extension includes its own copy (static inline): nothing is linked across.
 */
#ifndef WARREN_CSHARED_H
#define WARREN_CSHARED_H

#include <Python.h>
#include <structmember.h>
#include <string.h>

static inline unsigned int be16(const unsigned char *p) { return ((unsigned int)p[0] << 8) | p[1]; }

static inline unsigned long long be32(const unsigned char *p)
{
    return ((unsigned long long)p[0] << 24) | ((unsigned long long)p[1] << 16) |
           ((unsigned long long)p[2] << 8) | p[3];
}

static inline unsigned long long be64(const unsigned char *p) { return (be32(p) << 32) | be32(p + 4); }

static inline unsigned char *put16(unsigned char *p, unsigned int v)
{
    p[0] = (unsigned char)(v >> 8);
    p[1] = (unsigned char)v;
    return p + 2;
}

static inline unsigned char *put32(unsigned char *p, unsigned long long v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
    return p + 4;
}

static inline unsigned char *put64(unsigned char *p, unsigned long long v)
{
    put32(p, v >> 32);
    return put32(p + 4, v & 0xFFFFFFFFULL);
}

static inline unsigned char *put(unsigned char *p, const Py_buffer *v)
{
    memcpy(p, v->buf, v->len);
    return p + v->len;
}

/* The offset of the writable object slot ``name`` in instances of tp, -1 when it is not one. */
static inline Py_ssize_t slot_offset(PyTypeObject *tp, PyObject *name)
{
    PyObject *d = PyObject_GetAttr((PyObject *)tp, name); /* a slot's class attribute: its descriptor */
    if (d == NULL) {
        PyErr_Clear();
        return -1;
    }
    Py_ssize_t offset = -1;
    if (Py_IS_TYPE(d, &PyMemberDescr_Type)) {
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type == T_OBJECT_EX && !(m->flags & READONLY) && PyType_IsSubtype(tp, PyDescr_TYPE(d)))
            offset = m->offset;
    }
    Py_DECREF(d);
    return offset;
}

#endif /* WARREN_CSHARED_H */
