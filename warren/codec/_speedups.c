/*
 * warren.codec._speedups: the compiled halves of the basic.publish and basic.deliver fast paths,
 * and of the store's record framing (append_seq_record, below).
 *
 * Why: with a publish's three frames in the receive buffer (nearly always), finding them,
 * checking them and slicing out the arguments, properties and body was about half of the
 * broker's CPU per published message in pure Python (bench/pipeline.py pubonly; see
 * docs/performance.md). This does exactly what ServerConnection._publish's pure-Python fast
 * path does, in one call; the Python code stays the fallback when this module is not built,
 * and tests run both and compare them (tests/protocol/test_speedups.py).
 *
 * take_publish(buf, pos, frame_max, max_body, last_args, last_props)
 *     buf: the receive buffer (any object with the buffer protocol), pos: where the next
 *     frame starts. Returns None unless buf[pos:] starts with a complete basic.publish method
 *     frame, its content header frame and (for a non-empty body) one body frame holding the
 *     whole body, all on the same channel, all well formed and within frame_max (0 = no
 *     limit), the header's class 60 and body size <= max_body. Otherwise returns
 *     (channel, args, props, body, next_pos): args are the method's argument octets (after
 *     the class and method ids) and props the header's property flags and list; each is the
 *     very object last_args / last_props when equal to it (callers reuse what they decoded),
 *     else new bytes. Anything unusual returns None and is left to the general path, which
 *     reports errors: this never raises for what is in the buffer. A property list that is not
 *     last_props is checked (props_error, below) and a malformed one is unusual too: the
 *     Python path refuses it (541, as RabbitMQ), so nothing malformed is ever stored.
 *
 * take_publishes(buf, pos, frame_max, max_body, last_args, last_props, limit)
 *     The same for a run of publishes on one channel with the same method arguments (a
 *     publisher streaming into one exchange and routing key): up to limit at once, as lists,
 *     so the broker handles the run with one event (ServerConnection.next_event, Publishes).
 *
 * properties_error(buf, start, end) -> None | str
 *     The compiled twin of warren.codec.properties.properties_error: None when buf[start:end]
 *     is a well-formed basic property list (every property inside the list, nothing after the
 *     last, a headers table of the types RabbitMQ accepts, at most MAX_TABLE_DEPTH deep), else
 *     a reason. Tests check that both give the same verdict on any octets.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define FRAME_METHOD 1
#define FRAME_HEADER 2
#define FRAME_BODY 3
#define FRAME_END 0xCE

static inline unsigned int be16(const unsigned char *p) { return ((unsigned int)p[0] << 8) | p[1]; }

static inline unsigned long long be32(const unsigned char *p)
{
    return ((unsigned long long)p[0] << 24) | ((unsigned long long)p[1] << 16) |
           ((unsigned long long)p[2] << 8) | p[3];
}

static inline unsigned long long be64(const unsigned char *p) { return (be32(p) << 32) | be32(p + 4); }

/* One whole frame at off: its type, channel and payload span; 0 if absent, cut short, over
 * frame_max or without its frame-end octet. */
static int frame_at(const unsigned char *b, Py_ssize_t len, Py_ssize_t off, unsigned long long frame_max,
                    int *type, unsigned int *channel, Py_ssize_t *start, Py_ssize_t *end)
{
    if (off < 0 || len - off < 8)
        return 0;
    unsigned long long size = be32(b + off + 3);
    if (frame_max && size + 8 > frame_max)
        return 0;
    if ((unsigned long long)(len - off - 8) < size)
        return 0;
    Py_ssize_t e = off + 7 + (Py_ssize_t)size;
    if (b[e] != FRAME_END)
        return 0;
    *type = b[off];
    *channel = be16(b + off + 1);
    *start = off + 7;
    *end = e;
    return 1;
}

/* The limits of warren/codec/fields.py: MAX_TABLE_DEPTH and TIMESTAMP_MAX (year 9999). */
#define MAX_TABLE_DEPTH 100
#define TIMESTAMP_MAX 253402300799ULL

/* Why the entries b[off:end] of a headers table (or, for an array, its values) are malformed,
 * or NULL. end is within the buffer; every read is checked against it. */
static const char *table_error(const unsigned char *b, Py_ssize_t off, Py_ssize_t end, int depth, int array)
{
    if (depth > MAX_TABLE_DEPTH)
        return "field tables nested more than 100 deep";
    while (off < end) {
        if (!array) {
            off += 1 + (Py_ssize_t)b[off]; /* the name */
            if (off >= end)
                return "a table entry runs past the end of its table";
        }
        unsigned char tag = b[off++];
        Py_ssize_t size;
        switch (tag) {
        case 't': case 'b': case 'B':
            size = 1;
            break;
        case 's': case 'u':
            size = 2;
            break;
        case 'I': case 'i': case 'f':
            size = 4;
            break;
        case 'l': case 'L': case 'd':
            size = 8;
            break;
        case 'D':
            size = 5;
            break;
        case 'V':
            size = 0;
            break;
        case 'T':
            if (end - off < 8)
                return "a 'T' value runs past the end of its table";
            if (be64(b + off) > TIMESTAMP_MAX)
                return "a timestamp past the year 9999";
            size = 8;
            break;
        case 'S': case 'x': case 'F': case 'A': {
            if (end - off < 4)
                return "a length runs past the end of its table";
            unsigned long long n = be32(b + off);
            off += 4;
            if ((unsigned long long)(end - off) < n)
                return "a value runs past the end of its table";
            if (tag == 'F' || tag == 'A') {
                const char *why = table_error(b, off, off + (Py_ssize_t)n, depth + 1, tag == 'A');
                if (why)
                    return why;
            }
            size = (Py_ssize_t)n;
            break;
        }
        default:
            return "unknown field type in the headers table";
        }
        if (end - off < size)
            return "a value runs past the end of its table";
        off += size;
    }
    return NULL;
}

/* Why b[start:end] is not a well-formed basic property list, or NULL (properties.py's rules). */
static const char *props_error(const unsigned char *b, Py_ssize_t start, Py_ssize_t end)
{
    if (end - start < 2)
        return "the property flags are cut short";
    unsigned int flags = be16(b + start);
    if (flags & 1)
        return "a second property flag word (no basic property needs one)";
    Py_ssize_t off = start + 2;
    for (unsigned int flag = 0x8000; flag >= 0x0004; flag >>= 1) {
        if (!(flags & flag))
            continue;
        if (flag == 0x2000) { /* headers */
            if (end - off < 4)
                return "the headers table length runs past the end of the property list";
            unsigned long long n = be32(b + off);
            off += 4;
            if ((unsigned long long)(end - off) < n)
                return "the headers table runs past the end of the property list";
            const char *why = table_error(b, off, off + (Py_ssize_t)n, 1, 0);
            if (why)
                return why;
            off += (Py_ssize_t)n;
        }
        else if (flag == 0x1000 || flag == 0x0800) { /* delivery-mode, priority: octets */
            if (end - off < 1)
                return "an octet property runs past the end of the property list";
            off += 1;
        }
        else if (flag == 0x0040) { /* timestamp */
            if (end - off < 8)
                return "timestamp runs past the end of the property list";
            off += 8;
        }
        else { /* the shortstrs */
            if (end - off < 1 || end - off - 1 < (Py_ssize_t)b[off])
                return "a shortstr property runs past the end of the property list";
            off += 1 + (Py_ssize_t)b[off];
        }
    }
    if (off != end)
        return "octets after the last property";
    return NULL;
}

static PyObject *properties_error(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "properties_error expects (buf, start, end)");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (start < 0 || end > view.len || start > end) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "start and end must lie within the buffer");
        return NULL;
    }
    const char *why = props_error((const unsigned char *)view.buf, start, end);
    PyBuffer_Release(&view);
    if (why == NULL)
        Py_RETURN_NONE;
    return PyUnicode_FromString(why);
}

/* last if its octets equal b[start:end], else new bytes (NULL on memory error). */
static PyObject *same_or_new(PyObject *last, const unsigned char *b, Py_ssize_t start, Py_ssize_t end)
{
    Py_ssize_t n = end - start;
    if (PyBytes_CheckExact(last) && PyBytes_GET_SIZE(last) == n && memcmp(PyBytes_AS_STRING(last), b + start, n) == 0) {
        Py_INCREF(last);
        return last;
    }
    return PyBytes_FromStringAndSize((const char *)b + start, n);
}

/* Where the spans of a whole basic.publish content at pos lie (method arguments, property list,
 * body), as take_publish's doc says; 0 when there is none or anything is unusual. A property
 * list equal to the octets at known_props (of known_len octets; NULL: none) was checked
 * before and is not scanned again; any other is. */
typedef struct {
    unsigned int channel;
    Py_ssize_t args, args_end, props, props_end, body, body_end, next;
} publish_spans;

static int publish_at(const unsigned char *b, Py_ssize_t len, Py_ssize_t pos, unsigned long long frame_max,
                      unsigned long long max_body, const char *known_props, Py_ssize_t known_len,
                      publish_spans *s, int *same_props)
{
    int type;
    unsigned int ch;
    Py_ssize_t ms, me, hs, he, bs, be;
    /* the method frame: basic.publish (60.40) */
    if (!frame_at(b, len, pos, frame_max, &type, &s->channel, &ms, &me) || type != FRAME_METHOD || me - ms < 4 ||
        be16(b + ms) != 60 || be16(b + ms + 2) != 40)
        return 0;
    /* the content header: class 60, weight, body size, then the property flags and list */
    if (!frame_at(b, len, me + 1, frame_max, &type, &ch, &hs, &he) || type != FRAME_HEADER || ch != s->channel ||
        he - hs < 14 || be16(b + hs) != 60)
        return 0;
    unsigned long long body_size = be64(b + hs + 4);
    if (body_size > max_body)
        return 0;
    s->next = he + 1;
    if (body_size) {
        if (!frame_at(b, len, he + 1, frame_max, &type, &ch, &bs, &be) || type != FRAME_BODY || ch != s->channel ||
            (unsigned long long)(be - bs) != body_size)
            return 0;
        s->next = be + 1;
    }
    else {
        bs = be = 0;
    }
    Py_ssize_t props_len = he - hs - 12;
    *same_props = known_props != NULL && known_len == props_len && memcmp(known_props, b + hs + 12, props_len) == 0;
    if (!*same_props && props_error(b, hs + 12, he) != NULL)
        return 0;
    s->args = ms + 4;
    s->args_end = me;
    s->props = hs + 12;
    s->props_end = he;
    s->body = bs;
    s->body_end = be;
    return 1;
}

/* A new 5-tuple, taking the references it is given (NULL if any is NULL, all released). */
static PyObject *tuple5(PyObject *a, PyObject *b, PyObject *c, PyObject *d, PyObject *e)
{
    PyObject *t = (a && b && c && d && e) ? PyTuple_New(5) : NULL;
    if (t == NULL) {
        Py_XDECREF(a);
        Py_XDECREF(b);
        Py_XDECREF(c);
        Py_XDECREF(d);
        Py_XDECREF(e);
        return NULL;
    }
    PyTuple_SET_ITEM(t, 0, a);
    PyTuple_SET_ITEM(t, 1, b);
    PyTuple_SET_ITEM(t, 2, c);
    PyTuple_SET_ITEM(t, 3, d);
    PyTuple_SET_ITEM(t, 4, e);
    return t;
}

/* The arguments the frame takers (take_publish, take_publishes, take_acks) share: exactly
 * `want` of them, the buffer first, then pos and frame_max, and where the taker has them (an
 * index, or -1) max_body and limit. 0 with the buffer's view held (the caller releases it), or
 * -1 with an exception set and nothing held. */
typedef struct {
    Py_buffer view;
    Py_ssize_t pos, limit;
    unsigned long long frame_max, max_body;
} taker_args;

static int parse_taker_args(const char *name, PyObject *const *args, Py_ssize_t nargs, Py_ssize_t want,
                            int max_body_at, int limit_at, taker_args *a)
{
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "%s expects %zd arguments", name, want);
        return -1;
    }
    a->pos = PyLong_AsSsize_t(args[1]);
    a->frame_max = PyLong_AsUnsignedLongLong(args[2]);
    a->max_body = max_body_at >= 0 ? PyLong_AsUnsignedLongLong(args[max_body_at]) : 0;
    a->limit = limit_at >= 0 ? PyLong_AsSsize_t(args[limit_at]) : 0;
    if (PyErr_Occurred())
        return -1;
    return PyObject_GetBuffer(args[0], &a->view, PyBUF_SIMPLE) < 0 ? -1 : 0;
}

static PyObject *take_publish(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    taker_args a;
    if (parse_taker_args("take_publish", args, nargs, 6, 3, -1, &a) < 0)
        return NULL;
    Py_buffer *view = &a.view;
    Py_ssize_t pos = a.pos;
    unsigned long long frame_max = a.frame_max, max_body = a.max_body;
    const unsigned char *b = (const unsigned char *)view->buf;
    PyObject *last_props = args[5];
    int known = PyBytes_CheckExact(last_props);
    publish_spans s;
    int same_props;
    PyObject *result = Py_None;
    if (publish_at(b, view->len, pos, frame_max, max_body, known ? PyBytes_AS_STRING(last_props) : NULL,
                   known ? PyBytes_GET_SIZE(last_props) : 0, &s, &same_props)) {
        PyObject *props;
        if (same_props) {
            Py_INCREF(last_props);
            props = last_props;
        }
        else
            props = PyBytes_FromStringAndSize((const char *)b + s.props, s.props_end - s.props);
        result = tuple5(PyLong_FromUnsignedLong(s.channel), same_or_new(args[4], b, s.args, s.args_end), props,
                        PyBytes_FromStringAndSize((const char *)b + s.body, s.body_end - s.body),
                        PyLong_FromSsize_t(s.next));
    }
    else
        Py_INCREF(result);
    PyBuffer_Release(view);
    return result;
}

/*
 * take_publishes(buf, pos, frame_max, max_body, last_args, last_props, limit)
 *     A run of basic.publish contents at pos: what take_publish takes, then as many more
 *     (up to limit in all) as follow it at once on the same channel with the same method
 *     argument octets (exchange, routing key, flags), each as take_publish would take it.
 *     None when take_publish would return None; a run of one is what take_publish returns;
 *     else (channel, args, props, bodies, next_pos) with props and bodies lists of the same
 *     length (two or more), in order. A property list equal to the
 *     one before it (last_props for the first) is that very object. The run stops before
 *     anything take_publish would not take, which the next call (or the general path) gets.
 */
static PyObject *take_publishes(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    taker_args a;
    if (parse_taker_args("take_publishes", args, nargs, 7, 3, 6, &a) < 0)
        return NULL;
    Py_buffer *view = &a.view;
    Py_ssize_t pos = a.pos, limit = a.limit;
    unsigned long long frame_max = a.frame_max, max_body = a.max_body;
    const unsigned char *b = (const unsigned char *)view->buf;
    Py_ssize_t len = view->len;
    PyObject *props = args[5];  /* the previous message's property list (borrowed) */
    publish_spans first, s;
    int same_props;
    int known = PyBytes_CheckExact(props);
    if (!publish_at(b, len, pos, frame_max, max_body, known ? PyBytes_AS_STRING(props) : NULL,
                    known ? PyBytes_GET_SIZE(props) : 0, &first, &same_props)) {
        PyBuffer_Release(view);
        Py_RETURN_NONE;
    }
    /* the first publish as take_publish takes it; lists only once a second one follows */
    PyObject *props_list = NULL, *bodies = NULL;
    PyObject *margs = same_or_new(args[4], b, first.args, first.args_end);
    PyObject *p = NULL, *body = NULL;
    if (margs == NULL)
        goto fail;
    if (same_props) {
        Py_INCREF(props);
        p = props;
    }
    else if ((p = PyBytes_FromStringAndSize((const char *)b + first.props, first.props_end - first.props)) == NULL)
        goto fail;
    if ((body = PyBytes_FromStringAndSize((const char *)b + first.body, first.body_end - first.body)) == NULL)
        goto fail;
    pos = first.next;
    Py_ssize_t args_len = first.args_end - first.args;
    for (Py_ssize_t n = 1; n < limit; n++) {
        if (!publish_at(b, len, pos, frame_max, max_body, PyBytes_AS_STRING(p), PyBytes_GET_SIZE(p), &s,
                        &same_props) || s.channel != first.channel || s.args_end - s.args != args_len ||
            memcmp(b + s.args, b + first.args, args_len) != 0)
            break;
        if (props_list == NULL) { /* a run: the first one goes into the lists too */
            if ((props_list = PyList_New(0)) == NULL || (bodies = PyList_New(0)) == NULL ||
                PyList_Append(props_list, p) < 0 || PyList_Append(bodies, body) < 0)
                goto fail;
            Py_DECREF(body);
            body = NULL;
        }
        Py_DECREF(p);  /* the list holds it: borrowed until replaced here */
        if (same_props)
            Py_INCREF(p);
        else if ((p = PyBytes_FromStringAndSize((const char *)b + s.props, s.props_end - s.props)) == NULL)
            goto fail;
        if (PyList_Append(props_list, p) < 0)
            goto fail;
        PyObject *next_body = PyBytes_FromStringAndSize((const char *)b + s.body, s.body_end - s.body);
        if (next_body == NULL)
            goto fail;
        int failed = PyList_Append(bodies, next_body);
        Py_DECREF(next_body);
        if (failed)
            goto fail;
        pos = s.next;
    }
    PyBuffer_Release(view);
    if (props_list == NULL) /* a run of one: take_publish's answer, no lists */
        return tuple5(PyLong_FromUnsignedLong(first.channel), margs, p, body, PyLong_FromSsize_t(pos));
    Py_DECREF(p);
    return tuple5(PyLong_FromUnsignedLong(first.channel), margs, props_list, bodies, PyLong_FromSsize_t(pos));
fail:
    Py_XDECREF(p);
    Py_XDECREF(body);
    Py_XDECREF(props_list);
    Py_XDECREF(bodies);
    Py_XDECREF(margs);
    PyBuffer_Release(view);
    return NULL;
}

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

/*
 * deliver_frames(channel, consumer_tag, delivery_tag, redelivered, exchange, routing_key,
 *                properties, body) -> bytes
 *     basic.deliver's method frame, content header frame and one body frame as one bytes
 *     object: what ServerConnection.send_deliver builds with packs and a join for a body that
 *     fits one frame (the caller checks that). consumer_tag, exchange and routing_key come
 *     shortstr-encoded (length octet included); properties are the encoded flags and list.
 */
static PyObject *deliver_frames(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "deliver_frames expects 8 arguments");
        return NULL;
    }
    unsigned long channel = PyLong_AsUnsignedLong(args[0]);
    unsigned long long tag = PyLong_AsUnsignedLongLong(args[2]);
    int redelivered = PyObject_IsTrue(args[3]);
    if (PyErr_Occurred() || redelivered < 0)
        return NULL;
    if (channel > 0xFFFF) {
        PyErr_SetString(PyExc_OverflowError, "channel above 65535");
        return NULL;
    }
    Py_buffer v[5];  /* consumer_tag, exchange, routing_key, properties, body */
    PyObject *const src[5] = {args[1], args[4], args[5], args[6], args[7]};
    int got = 0;
    PyObject *out = NULL;
    for (; got < 5; got++)
        if (PyObject_GetBuffer(src[got], &v[got], PyBUF_SIMPLE) < 0)
            goto done;
    Py_ssize_t method_size = 4 + v[0].len + 9 + v[1].len + v[2].len;
    Py_ssize_t total = 7 + method_size + 1 + 7 + 12 + v[3].len + 1 + 7 + v[4].len + 1;
    out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL)
        goto done;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
    *p++ = FRAME_METHOD;
    p = put16(p, (unsigned int)channel);
    p = put32(p, (unsigned long long)method_size);
    p = put16(p, 60);
    p = put16(p, 60);
    p = put(p, &v[0]);
    p = put64(p, tag);
    *p++ = redelivered ? 1 : 0;
    p = put(p, &v[1]);
    p = put(p, &v[2]);
    *p++ = FRAME_END;
    *p++ = FRAME_HEADER;
    p = put16(p, (unsigned int)channel);
    p = put32(p, (unsigned long long)(12 + v[3].len));
    p = put16(p, 60);
    p = put16(p, 0);
    p = put64(p, (unsigned long long)v[4].len);
    p = put(p, &v[3]);
    *p++ = FRAME_END;
    *p++ = FRAME_BODY;
    p = put16(p, (unsigned int)channel);
    p = put32(p, (unsigned long long)v[4].len);
    p = put(p, &v[4]);
    *p++ = FRAME_END;
done:
    while (got-- > 0)
        PyBuffer_Release(&v[got]);
    return out;
}

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

static PyObject *take_acks(PyObject *self, PyObject *const *args, Py_ssize_t nargs); /* at the end */

static PyMethodDef methods[] = {
    {"append_seq_record", (PyCFunction)(void (*)(void))append_seq_record, METH_FASTCALL,
     "append_seq_record(buf, rtype, seq, rest) -> int: one store record appended to a bytearray."},
    {"deliver_frames", (PyCFunction)(void (*)(void))deliver_frames, METH_FASTCALL,
     "deliver_frames(channel, consumer_tag, delivery_tag, redelivered, exchange, routing_key, properties, body) "
     "-> bytes: basic.deliver with its header and one body frame."},
    {"properties_error", (PyCFunction)(void (*)(void))properties_error, METH_FASTCALL,
     "properties_error(buf, start, end) -> None | str: why buf[start:end] is not a well-formed basic property list."},
    {"untrack", (PyCFunction)untrack, METH_O,
     "untrack(obj) -> None: the garbage collector no longer visits obj (for objects that cannot be in a cycle)."},
    {"take_publish", (PyCFunction)(void (*)(void))take_publish, METH_FASTCALL,
     "take_publish(buf, pos, frame_max, max_body, last_args, last_props) -> None | "
     "(channel, args, props, body, next_pos): a whole basic.publish content at pos."},
    {"take_acks", (PyCFunction)(void (*)(void))take_acks, METH_FASTCALL,
     "take_acks(buf, pos, frame_max, limit) -> None | (channel, tag | [tag, ...], multiple, next_pos): "
     "basic.ack frames at pos."},
    {"take_publishes", (PyCFunction)(void (*)(void))take_publishes, METH_FASTCALL,
     "take_publishes(buf, pos, frame_max, max_body, last_args, last_props, limit) -> None | "
     "(channel, args, props_list, bodies, next_pos): a run of basic.publish contents at pos."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "warren.codec._speedups", "Compiled fast paths of the codec (optional).", -1, methods,
};

PyMODINIT_FUNC PyInit__speedups(void)
{
    crc_init();
    return PyModule_Create(&module);
}

/*
 * take_acks(buf, pos, frame_max, limit)
 *     basic.ack method frames at pos, as a consumer that acks one message at a time sends them
 *     (warren/codec/acks.py has the Python twin, the same answers). None unless the frame at pos
 *     is a whole basic.ack with a payload of exactly 13 octets (class 60, method 80, uint64
 *     delivery tag, the bits octet) within frame_max: anything else is the general path's. For
 *     one: (channel, tag, multiple, next_pos). When more acks without multiple follow it at once
 *     on the same channel: (channel, [tag, ...], False, next_pos), up to limit tags. An ack with
 *     multiple set is always taken alone (a run stops before it).
 */
static int ack_at(const unsigned char *b, Py_ssize_t len, Py_ssize_t pos, unsigned long long frame_max,
                  unsigned int *channel, unsigned long long *tag, int *multiple, Py_ssize_t *next)
{
    int type;
    Py_ssize_t start, end;
    if (!frame_at(b, len, pos, frame_max, &type, channel, &start, &end))
        return 0;
    if (type != FRAME_METHOD || end - start != 13 || be32(b + start) != ((60ULL << 16) | 80ULL))
        return 0;
    *tag = be64(b + start + 4);
    *multiple = b[start + 12] & 1;
    *next = end + 1;
    return 1;
}

static PyObject *take_acks(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    taker_args a;
    if (parse_taker_args("take_acks", args, nargs, 4, -1, 3, &a) < 0)
        return NULL;
    Py_buffer *view = &a.view;
    Py_ssize_t pos = a.pos, limit = a.limit;
    unsigned long long frame_max = a.frame_max;
    const unsigned char *b = (const unsigned char *)view->buf;
    unsigned int channel, ch2;
    unsigned long long tag, tag2;
    int multiple, multiple2;
    Py_ssize_t next, next2;
    PyObject *result = NULL, *tags = NULL, *first = NULL;
    if (!ack_at(b, view->len, pos, frame_max, &channel, &tag, &multiple, &next)) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    if ((first = PyLong_FromUnsignedLongLong(tag)) == NULL)
        goto done;
    while (!multiple && ack_at(b, view->len, next, frame_max, &ch2, &tag2, &multiple2, &next2) && ch2 == channel &&
           !multiple2) {
        if (tags == NULL) {
            if (limit < 2)
                break;
            if ((tags = PyList_New(1)) == NULL)
                goto done;
            Py_INCREF(first);
            PyList_SET_ITEM(tags, 0, first);
        }
        else if (PyList_GET_SIZE(tags) >= limit)
            break;
        PyObject *t = PyLong_FromUnsignedLongLong(tag2);
        if (t == NULL || PyList_Append(tags, t) < 0) {
            Py_XDECREF(t);
            goto done;
        }
        Py_DECREF(t);
        next = next2;
    }
    PyObject *ch = PyLong_FromUnsignedLong(channel), *nx = PyLong_FromSsize_t(next);
    if (ch == NULL || nx == NULL || (result = PyTuple_New(4)) == NULL) {
        Py_XDECREF(ch);
        Py_XDECREF(nx);
        goto done;
    }
    PyObject *what = tags != NULL ? tags : first, *flag = multiple ? Py_True : Py_False;
    Py_INCREF(what);
    Py_INCREF(flag);
    PyTuple_SET_ITEM(result, 0, ch);
    PyTuple_SET_ITEM(result, 1, what);
    PyTuple_SET_ITEM(result, 2, flag);
    PyTuple_SET_ITEM(result, 3, nx);
done:
    Py_XDECREF(first);
    Py_XDECREF(tags);
    PyBuffer_Release(view);
    return result;
}
