/*
 * warren.broker._messages: the compiled twins of warren/broker/message.py's helpers for runs of
 * publishes: untrack and clone_messages (compared with clone_messages_py in
 * tests/protocol/test_speedups.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

#include "_cshared.h"

/*
 * untrack(obj) -> None
 *     Takes obj out of the cyclic garbage collector's sight (PyObject_GC_UnTrack). For objects
 *     that can never be part of a reference cycle: warren.broker.message.Message, whose fields
 *     are strings, octets, numbers and the decoded properties (which never refer back). A
 *     queued message is then never visited by a collection, nor is its queue entry (CPython
 *     stops tracking a tuple of untracked items at its first pass).
 */
static PyObject *untrack(PyObject *self, PyObject *obj)
{
    if (PyObject_GC_IsTracked(obj))
        PyObject_GC_UnTrack(obj);
    Py_RETURN_NONE;
}

/* ---- the messages of a run of publishes (BrokerChannel.publish_run) ------------------------
 *
 * clone_messages(template, properties, bodies)
 *     The compiled twin of warren.broker.message.clone_messages_py: the Messages of a run of
 *     publishes with one exchange and routing key, the first (template, built by the caller
 *     with Message(...)) included: item i has every slot of template but its own properties[i]
 *     and bodies[i], and persistent from properties[i]'s delivery-mode octet (read as
 *     message._delivery_mode reads it). Every item is untracked (untrack above: a Message
 *     cannot be in a cycle). None when a property list after the first is cut short: the
 *     caller then builds them one by one, and Message(...) reports it at its place.
 *     template's class must keep its attributes in its own slots only (no __dict__, no base
 *     with slots): Message. Costs a fraction of Message(...) per item: the run's name lookups
 *     and its __init__ frame are the template's alone.
 */
static PyObject *str_run_properties, *str_run_body, *str_run_persistent;

/* 1 or 0: whether the property list says delivery-mode 2; -1 when it is cut short */
static int persistent_of(const unsigned char *p, Py_ssize_t n)
{
    if (n < 2 || !(p[0] & 0x10)) /* no delivery-mode */
        return 0;
    Py_ssize_t off = 2;
    if (p[0] & 0x80) { /* content-type, shortstr */
        if (off >= n)
            return -1;
        off += 1 + p[off];
    }
    if (p[0] & 0x40) { /* content-encoding, shortstr */
        if (off >= n)
            return -1;
        off += 1 + p[off];
    }
    if (p[0] & 0x20) { /* headers, a table: long size, then that many octets */
        if (off + 4 > n)
            return -1;
        off += 4 + (Py_ssize_t)be32(p + off);
    }
    if (off >= n)
        return -1;
    return p[off] == 2;
}

static PyObject *clone_messages(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "clone_messages expects 3 arguments");
        return NULL;
    }
    PyObject *template = args[0], *props = args[1], *bodies = args[2];
    PyTypeObject *tp = Py_TYPE(template);
    if (!PyList_CheckExact(props) || !PyList_CheckExact(bodies) || PyList_GET_SIZE(props) != PyList_GET_SIZE(bodies)) {
        PyErr_SetString(PyExc_TypeError, "properties and bodies must be lists of the same length");
        return NULL;
    }
    if (!(tp->tp_flags & Py_TPFLAGS_HEAPTYPE) || tp->tp_base != &PyBaseObject_Type || tp->tp_dictoffset != 0 ||
        tp->tp_itemsize != 0 || tp->tp_members == NULL || !PyType_IS_GC(tp)) {
        PyErr_SetString(PyExc_TypeError, "template's class must keep its attributes in its own __slots__");
        return NULL;
    }
    if (str_run_properties == NULL) {
        if ((str_run_properties = PyUnicode_InternFromString("properties")) == NULL ||
            (str_run_body = PyUnicode_InternFromString("body")) == NULL ||
            (str_run_persistent = PyUnicode_InternFromString("persistent")) == NULL)
            return NULL;
    }
    Py_ssize_t at_props = slot_offset(tp, str_run_properties), at_body = slot_offset(tp, str_run_body);
    Py_ssize_t at_persistent = slot_offset(tp, str_run_persistent);
    if (at_props < 0 || at_body < 0 || at_persistent < 0) {
        PyErr_SetString(PyExc_TypeError, "template's class has no properties, body and persistent slots");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(bodies);
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    if (n == 0)
        return out;
    Py_INCREF(template);
    PyList_SET_ITEM(out, 0, template);
    if (PyObject_GC_IsTracked(template))
        PyObject_GC_UnTrack(template);
    PyObject *last_props = NULL;
    int persistent = 0;
    for (Py_ssize_t i = 1; i < n; i++) {
        PyObject *p = PyList_GET_ITEM(props, i);
        if (p != last_props) {
            if (!PyBytes_CheckExact(p)) {
                PyErr_SetString(PyExc_TypeError, "property lists must be bytes");
                goto fail;
            }
            persistent = persistent_of((const unsigned char *)PyBytes_AS_STRING(p), PyBytes_GET_SIZE(p));
            if (persistent < 0) {
                Py_DECREF(out);
                Py_RETURN_NONE;
            }
            last_props = p;
        }
        PyObject *msg = tp->tp_alloc(tp, 0);
        if (msg == NULL)
            goto fail;
        PyObject_GC_UnTrack(msg); /* filled below, never tracked again */
        for (PyMemberDef *m = tp->tp_members; m->name != NULL; m++) {
            if (m->type != T_OBJECT_EX && m->type != T_OBJECT)
                continue;
            PyObject *v = *(PyObject **)((char *)template + m->offset);
            Py_XINCREF(v);
            *(PyObject **)((char *)msg + m->offset) = v;
        }
        PyObject **slot = (PyObject **)((char *)msg + at_props);
        Py_XSETREF(*slot, Py_NewRef(p));
        slot = (PyObject **)((char *)msg + at_body);
        Py_XSETREF(*slot, Py_NewRef(PyList_GET_ITEM(bodies, i)));
        slot = (PyObject **)((char *)msg + at_persistent);
        Py_XSETREF(*slot, Py_NewRef(persistent ? Py_True : Py_False));
        PyList_SET_ITEM(out, i, msg);
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"untrack", (PyCFunction)untrack, METH_O,
     "untrack(obj) -> None: the garbage collector no longer visits obj (for objects that cannot be in a cycle)."},
    {"clone_messages", (PyCFunction)(void (*)(void))clone_messages, METH_FASTCALL,
     "clone_messages(template, properties, bodies) -> None | [message, ...]: the Messages of a run of "
     "publishes, untracked (warren/broker/message.py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "warren.broker._messages", "Compiled message runs of the broker (optional).", -1,
    methods,
};

PyMODINIT_FUNC PyInit__messages(void)
{
    return PyModule_Create(&module);
}
