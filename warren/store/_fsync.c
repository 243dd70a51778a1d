/*
 * warren.store._fsync: the group commit's file I/O. Its writes in one call that lets the GIL go
 * once (write_and_dup, below; Python twin in warren/store/fileio.py), and its fsyncs on a thread
 * that never takes the GIL (FsyncWorker).
 *
 * Why: a busy broker's event loop holds the GIL nearly all the time, and a Python sync thread
 * has to win it back for every step of its job (its start, each return from a system call, the
 * hand-back to the loop). In the 1p1c-1KiB-persist-confirm row a group commit took about
 * 1.05 ms from the loop's request to its completion, of which the disk was 0.18 ms: the rest
 * was those waits (docs/performance.md, session 8). The loop hands this thread a sync's whole
 * disk work: write the buffers (the loop never writes a store file: a write can wait behind a
 * stalled fsync of the same file, or for a stalled disk's dirty pages), fsync and close the
 * descriptors, unlink the fully acked segments, fsync and close the directory. The thread works through the jobs one at a time in the order they
 * came, so a job starts only after every earlier one ended (the store's ordering rule: unlinks
 * and the directory only after every earlier sync), and reports each finished job through an
 * eventfd the loop watches.
 *
 * FsyncWorker(then=None) -> worker
 *                                          then: another FsyncWorker; this one then only
 *                                          writes, and passes each job on to it for the rest
 *                                          (after a failed write, with that error: it closes
 *                                          the descriptors and fails the job). Both report the
 *                                          job. So writes go on while an fsync stalls. Close
 *                                          this one before ``then``.
 *     worker.fileno()                      the eventfd, readable when jobs finished
 *     worker.submit(job, fds, unlinks, dir_fds[, writes])
 *                                          writes: (fd, octets) pairs written whole, in order,
 *                                          before anything else (each fd closed after; the
 *                                          octets are held, unchanged, until completed()
 *                                          reports the job; after a failed write nothing is
 *                                          written or fsynced);
 *                                          job: an int the caller chooses; fds: descriptors to
 *                                          fsync then close (each is closed whatever happens; no
 *                                          fsync after a failed one); unlinks: bytes paths
 *                                          unlinked after the fds' fsyncs succeeded (a missing
 *                                          file is no error); dir_fds: fsynced after the
 *                                          unlinks (skipped after an error) and closed. The
 *                                          worker owns every descriptor from here on.
 *     worker.completed() -> [(job, errno), ...]
 *                                          the jobs finished since the last call, in order;
 *                                          errno 0 for success (the first error of the job).
 *                                          After a job failed, every later one fails with its
 *                                          errno without touching the disk (only closes).
 *     worker.wait_idle()                   blocks (without the GIL) until no job is queued or
 *                                          running
 *     worker.close()                       finishes the queued jobs, stops the thread
 *
 * The Python twin with the same steps on a threading.Thread is warren/store/fsync_worker.py.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

typedef struct job {
    struct job *next;
    long long id;
    int err;
    int nfds, ndirs, nunlinks, nwrites;
    int *fds;      /* nfds, then ndirs */
    char **unlinks;
    int *wfds;     /* nwrites descriptors, each written views[i] then closed */
    Py_buffer *views;
    struct job *pass_on; /* the fsyncs and unlinks, for the worker's ``then`` after the writes */
} job;

typedef struct {
    PyObject_HEAD
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;       /* a job queued, or stop */
    pthread_cond_t idle;       /* the queue ran empty */
    job *todo_head, *todo_tail;
    job *done_head, *done_tail;
    int busy;                  /* a job is being worked on */
    int stop;
    int started;
    int efd;
    int failed;                /* the first job's error (worker thread only): every later job fails with it */
    PyObject *then;            /* an FsyncWorker that takes each job on after its writes, or NULL */
} FsyncWorker;

static void enqueue(FsyncWorker *w, job *j);

/* With the GIL held when the job holds writes (their octets are the loop's buffers, released
 * here); a job passed on holds none, and is freed without it. */
static void free_job(job *j)
{
    if (j == NULL)
        return;
    for (int i = 0; i < j->nwrites; i++)
        PyBuffer_Release(&j->views[i]);
    free(j->views);
    free(j->wfds);
    free_job(j->pass_on); /* never passed on: its descriptors are the caller's still */
    for (int i = 0; i < j->nunlinks; i++)
        free(j->unlinks[i]);
    free(j->unlinks);
    free(j->fds);
    free(j);
}

static void close_all(job *j)
{
    for (int i = 0; i < j->nwrites; i++)
        close(j->wfds[i]);
    for (int i = 0; i < j->nfds + j->ndirs; i++)
        close(j->fds[i]);
}

static int write_whole(int fd, const char *p, Py_ssize_t left)
{
    while (left > 0) {
        ssize_t n = write(fd, p, (size_t)left);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        p += n;
        left -= n;
    }
    return 0;
}

static void run_job(job *j)
{
    int err = 0, i;
    for (i = 0; i < j->nwrites; i++) {
        if (!err)
            err = write_whole(j->wfds[i], j->views[i].buf, j->views[i].len);
        if (close(j->wfds[i]) < 0 && !err && errno != EINTR)
            err = errno;
    }
    for (i = 0; i < j->nfds; i++) {
        if (!err && fsync(j->fds[i]) < 0)
            err = errno;
        if (close(j->fds[i]) < 0 && !err && errno != EINTR)
            err = errno;
    }
    for (i = 0; i < j->nunlinks && !err; i++) {
        if (unlink(j->unlinks[i]) < 0 && errno != ENOENT)
            err = errno;
    }
    for (i = j->nfds; i < j->nfds + j->ndirs; i++) {
        if (!err && fsync(j->fds[i]) < 0)
            err = errno;
        if (close(j->fds[i]) < 0 && !err && errno != EINTR)
            err = errno;
    }
    j->err = err;
}

static void *worker_main(void *arg)
{
    FsyncWorker *w = (FsyncWorker *)arg;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (w->todo_head == NULL && !w->stop)
            pthread_cond_wait(&w->wake, &w->lock);
        if (w->todo_head == NULL)
            break; /* stop, and nothing left */
        job *j = w->todo_head;
        w->todo_head = j->next;
        if (w->todo_head == NULL)
            w->todo_tail = NULL;
        j->next = NULL;
        w->busy = 1;
        pthread_mutex_unlock(&w->lock);
        if (w->failed || j->err) { /* after a failed fsync the kernel may have dropped dirty pages:
                                      nothing is safe; j->err: its writes failed before it came */
            close_all(j);
            j->err = w->failed = w->failed ? w->failed : j->err;
        } else {
            run_job(j);
            w->failed = j->err;
        }
        job *rest = j->pass_on;
        j->pass_on = NULL;
        if (rest != NULL)
            rest->err = j->err;
        pthread_mutex_lock(&w->lock);
        /* reported here before ``then`` can report it: the loop hears of a job's writes first */
        if (w->done_tail)
            w->done_tail->next = j;
        else
            w->done_head = j;
        w->done_tail = j;
        uint64_t one = 1;
        /* the counter only wakes the loop; a full counter (never, at 2**64 - 2) would still be readable */
        while (write(w->efd, &one, sizeof one) < 0 && errno == EINTR)
            ;
        if (rest != NULL) { /* still busy: wait_idle returns once ``then`` holds it */
            pthread_mutex_unlock(&w->lock);
            enqueue((FsyncWorker *)w->then, rest);
            pthread_mutex_lock(&w->lock);
        }
        w->busy = 0;
        if (w->todo_head == NULL)
            pthread_cond_broadcast(&w->idle);
    }
    pthread_cond_broadcast(&w->idle);
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

/* A file descriptor from a Python int (-1 with an exception set when it is not one). */
static int fd_of(PyObject *v)
{
    long fd = PyLong_AsLong(v);
    if (fd == -1 && PyErr_Occurred())
        return -1;
    if (fd < 0 || fd > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "not a file descriptor");
        return -1;
    }
    return (int)fd;
}

/* One (fd, octets) pair of a list of writes: its descriptor, and its octets held in ``view``
 * (released by the caller); -1 with an exception set when it is not one. */
static int take_write(PyObject *item, const char *who, int *fd, Py_buffer *view)
{
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
        PyErr_Format(PyExc_TypeError, "%s: each write is a (fd, octets) pair", who);
        return -1;
    }
    *fd = fd_of(PyTuple_GET_ITEM(item, 0));
    if (*fd == -1 && PyErr_Occurred())
        return -1;
    return PyObject_GetBuffer(PyTuple_GET_ITEM(item, 1), view, PyBUF_SIMPLE);
}

/*
 * write_and_dup(writes, dup_fds) -> [fd, ...]
 *     writes: a list of (fd, octets) pairs, each written whole in order (write() again after a
 *     short write or EINTR); then every fd of the list dup_fds is duplicated (close-on-exec).
 *     Returns the new descriptors, in order. On an error nothing more is written, the
 *     duplicates made are closed and OSError is raised (the octets already written stay).
 */
static PyObject *write_and_dup(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_Check(args[0]) || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "write_and_dup expects (list of (fd, octets), list of fds)");
        return NULL;
    }
    PyObject *writes = args[0], *dup_list = args[1];
    Py_ssize_t nw = PyList_GET_SIZE(writes), nd = PyList_GET_SIZE(dup_list), got = 0, i;
    Py_buffer *views = PyMem_Calloc(nw ? nw : 1, sizeof(Py_buffer));
    int *wfds = PyMem_Calloc(nw ? nw : 1, sizeof(int));
    int *dfds = PyMem_Calloc(nd ? nd : 1, sizeof(int));
    PyObject *result = NULL;
    if (views == NULL || wfds == NULL || dfds == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (i = 0; i < nw; i++) {
        if (take_write(PyList_GET_ITEM(writes, i), "write_and_dup", &wfds[got], &views[got]) < 0)
            goto done;
        got++;
    }
    for (i = 0; i < nd; i++) {
        int fd = fd_of(PyList_GET_ITEM(dup_list, i));
        if (fd == -1 && PyErr_Occurred())
            goto done;
        dfds[i] = fd;
    }
    int err = 0;
    Py_ssize_t duped = 0;
    Py_BEGIN_ALLOW_THREADS
    for (i = 0; i < nw && !err; i++)
        err = write_whole(wfds[i], views[i].buf, views[i].len);
    for (i = 0; i < nd && !err; i++) {
        int fd = fcntl(dfds[i], F_DUPFD_CLOEXEC, 0);
        if (fd < 0) {
            err = errno;
            break;
        }
        dfds[duped++] = fd;
    }
    if (err)
        while (duped > 0)
            close(dfds[--duped]);
    Py_END_ALLOW_THREADS
    if (err) {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        goto done;
    }
    if ((result = PyList_New(duped)) == NULL) {
        for (i = 0; i < duped; i++)
            close(dfds[i]);
        goto done;
    }
    for (i = 0; i < duped; i++) {
        PyObject *v = PyLong_FromLong(dfds[i]);
        if (v == NULL) {
            for (Py_ssize_t k = i; k < duped; k++)
                close(dfds[k]);
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, v);
    }
done:
    for (i = 0; i < got; i++)
        PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(wfds);
    PyMem_Free(dfds);
    return result;
}

static PyTypeObject FsyncWorkerType;

static PyObject *FsyncWorker_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"then", NULL};
    PyObject *then = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:FsyncWorker", names, &then))
        return NULL;
    if (then != Py_None && !PyObject_TypeCheck(then, &FsyncWorkerType)) {
        PyErr_SetString(PyExc_TypeError, "FsyncWorker(then=...): another FsyncWorker, or None");
        return NULL;
    }
    FsyncWorker *w = (FsyncWorker *)type->tp_alloc(type, 0);
    if (w == NULL)
        return NULL;
    w->efd = -1;
    if (then != Py_None) {
        Py_INCREF(then);
        w->then = then;
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->wake, NULL);
    pthread_cond_init(&w->idle, NULL);
    w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->efd < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        Py_DECREF(w);
        return NULL;
    }
    int rc = pthread_create(&w->thread, NULL, worker_main, w);
    if (rc != 0) {
        errno = rc;
        PyErr_SetFromErrno(PyExc_OSError);
        Py_DECREF(w);
        return NULL;
    }
    w->started = 1;
    return (PyObject *)w;
}

/* Queue a job (any thread, without the GIL). A stopped worker runs nothing more: the job's
 * descriptors are closed and it is dropped (a job passed on holds no Python buffer). */
static void enqueue(FsyncWorker *w, job *j)
{
    pthread_mutex_lock(&w->lock);
    if (!w->started || w->stop) {
        pthread_mutex_unlock(&w->lock);
        close_all(j);
        free_job(j);
        return;
    }
    if (w->todo_tail)
        w->todo_tail->next = j;
    else
        w->todo_head = j;
    w->todo_tail = j;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
}

static void stop_thread(FsyncWorker *w)
{
    if (!w->started)
        return;
    pthread_mutex_lock(&w->lock);
    w->stop = 1;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
    Py_BEGIN_ALLOW_THREADS
    pthread_join(w->thread, NULL);
    Py_END_ALLOW_THREADS
    w->started = 0;
}

static void FsyncWorker_dealloc(FsyncWorker *w)
{
    stop_thread(w);
    job *j = w->done_head, *next;
    for (; j; j = next) {
        next = j->next;
        free_job(j);
    }
    if (w->efd >= 0)
        close(w->efd);
    Py_CLEAR(w->then);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->wake);
    pthread_cond_destroy(&w->idle);
    Py_TYPE(w)->tp_free((PyObject *)w);
}

static PyObject *FsyncWorker_fileno(FsyncWorker *w, PyObject *unused)
{
    return PyLong_FromLong(w->efd);
}

static PyObject *FsyncWorker_submit(FsyncWorker *w, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 4 || nargs > 5 || !PyList_Check(args[1]) || !PyList_Check(args[2]) || !PyList_Check(args[3])
            || (nargs == 5 && !PyList_Check(args[4]))) {
        PyErr_SetString(PyExc_TypeError, "submit expects (job, list of fds, list of bytes paths, list of fds"
                        "[, list of (fd, octets)])");
        return NULL;
    }
    if (!w->started) {
        PyErr_SetString(PyExc_ValueError, "the fsync worker is closed");
        return NULL;
    }
    long long id = PyLong_AsLongLong(args[0]);
    if (id == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t nfds = PyList_GET_SIZE(args[1]), nun = PyList_GET_SIZE(args[2]), ndirs = PyList_GET_SIZE(args[3]);
    Py_ssize_t nw = nargs == 5 ? PyList_GET_SIZE(args[4]) : 0;
    if (nfds + ndirs > INT32_MAX || nun > INT32_MAX || nw > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "too many descriptors");
        return NULL;
    }
    job *j = calloc(1, sizeof(job));
    if (j == NULL)
        return PyErr_NoMemory();
    j->id = id;
    j->fds = calloc((size_t)(nfds + ndirs) + 1, sizeof(int));
    j->unlinks = calloc((size_t)nun + 1, sizeof(char *));
    j->wfds = calloc((size_t)nw + 1, sizeof(int));
    j->views = calloc((size_t)nw + 1, sizeof(Py_buffer));
    if (j->fds == NULL || j->unlinks == NULL || j->wfds == NULL || j->views == NULL) {
        free_job(j);
        return PyErr_NoMemory();
    }
    Py_ssize_t i;
    for (i = 0; i < nw; i++) {
        if (take_write(PyList_GET_ITEM(args[4], i), "submit", &j->wfds[j->nwrites], &j->views[j->nwrites]) < 0)
            goto fail;
        j->nwrites++;
    }
    for (i = 0; i < nfds + ndirs; i++) {
        int fd = fd_of(PyList_GET_ITEM(i < nfds ? args[1] : args[3], i < nfds ? i : i - nfds));
        if (fd == -1 && PyErr_Occurred())
            goto fail;
        j->fds[i] = fd;
    }
    for (i = 0; i < nun; i++) {
        PyObject *p = PyList_GET_ITEM(args[2], i);
        if (!PyBytes_Check(p)) {
            PyErr_SetString(PyExc_TypeError, "submit: each path to unlink is bytes");
            goto fail;
        }
        Py_ssize_t len = PyBytes_GET_SIZE(p);
        if (memchr(PyBytes_AS_STRING(p), 0, (size_t)len) != NULL) {
            PyErr_SetString(PyExc_ValueError, "submit: a path with a NUL octet");
            goto fail;
        }
        char *copy = malloc((size_t)len + 1);
        if (copy == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        memcpy(copy, PyBytes_AS_STRING(p), (size_t)len);
        copy[len] = 0;
        j->unlinks[j->nunlinks++] = copy;
    }
    /* counted only once every argument was good: a refused job leaves the descriptors to the caller */
    j->nfds = (int)nfds;
    j->ndirs = (int)ndirs;
    if (w->then != NULL) { /* the writes here, the rest on ``then``'s thread */
        job *rest = calloc(1, sizeof(job));
        if (rest == NULL) {
            j->nfds = j->ndirs = 0; /* the descriptors stay the caller's */
            free_job(j);
            return PyErr_NoMemory();
        }
        rest->id = id;
        rest->fds = j->fds;
        rest->nfds = j->nfds;
        rest->ndirs = j->ndirs;
        rest->unlinks = j->unlinks;
        rest->nunlinks = j->nunlinks;
        j->fds = calloc(1, sizeof(int));
        j->unlinks = calloc(1, sizeof(char *));
        j->nfds = j->ndirs = j->nunlinks = 0;
        j->pass_on = rest;
        if (j->fds == NULL || j->unlinks == NULL) {
            rest->nfds = rest->ndirs = 0;
            free_job(j);
            return PyErr_NoMemory();
        }
    }
    enqueue(w, j);
    Py_RETURN_NONE;
fail:
    free_job(j);
    return NULL;
}

static PyObject *FsyncWorker_completed(FsyncWorker *w, PyObject *unused)
{
    uint64_t count;
    while (read(w->efd, &count, sizeof count) < 0 && errno == EINTR)
        ; /* EAGAIN: nothing counted since the last read; the list below is what matters */
    pthread_mutex_lock(&w->lock);
    job *j = w->done_head;
    w->done_head = w->done_tail = NULL;
    pthread_mutex_unlock(&w->lock);
    PyObject *out = PyList_New(0);
    job *next;
    for (; j; j = next) {
        next = j->next;
        if (out != NULL) {
            PyObject *item = Py_BuildValue("(Li)", j->id, j->err);
            if (item == NULL || PyList_Append(out, item) < 0)
                Py_CLEAR(out);
            Py_XDECREF(item);
        }
        free_job(j);
    }
    return out;
}

static PyObject *FsyncWorker_wait_idle(FsyncWorker *w, PyObject *unused)
{
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&w->lock);
    while (w->started && (w->todo_head != NULL || w->busy))
        pthread_cond_wait(&w->idle, &w->lock);
    pthread_mutex_unlock(&w->lock);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *FsyncWorker_close(FsyncWorker *w, PyObject *unused)
{
    stop_thread(w);
    Py_RETURN_NONE;
}

static PyMethodDef FsyncWorker_methods[] = {
    {"fileno", (PyCFunction)FsyncWorker_fileno, METH_NOARGS, "The eventfd, readable when jobs finished."},
    {"submit", (PyCFunction)(void (*)(void))FsyncWorker_submit, METH_FASTCALL,
     "submit(job, fds, unlinks, dir_fds[, writes]): write each (fd, octets) of writes and close the fd, fsync "
     "and close fds, unlink the paths, fsync and close dir_fds."},
    {"completed", (PyCFunction)FsyncWorker_completed, METH_NOARGS,
     "completed() -> [(job, errno), ...]: the jobs finished since the last call, in order."},
    {"wait_idle", (PyCFunction)FsyncWorker_wait_idle, METH_NOARGS, "Block until no job is queued or running."},
    {"close", (PyCFunction)FsyncWorker_close, METH_NOARGS, "Finish the queued jobs and stop the thread."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject FsyncWorkerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "warren.store._fsync.FsyncWorker",
    .tp_basicsize = sizeof(FsyncWorker),
    .tp_dealloc = (destructor)FsyncWorker_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The group commit's fsyncs on a thread without the GIL (module doc).",
    .tp_methods = FsyncWorker_methods,
    .tp_new = FsyncWorker_new,
};

static PyMethodDef module_methods[] = {
    {"write_and_dup", (PyCFunction)(void (*)(void))write_and_dup, METH_FASTCALL,
     "write_and_dup(writes, dup_fds) -> [fd, ...]: every (fd, octets) written whole, then the fds duplicated; "
     "the GIL let go once."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "warren.store._fsync", "The group commit's file I/O: its writes, and its fsyncs on a thread "
    "without the GIL.", -1, module_methods,
};

PyMODINIT_FUNC PyInit__fsync(void)
{
    if (PyType_Ready(&FsyncWorkerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&FsyncWorkerType);
    if (PyModule_AddObject(m, "FsyncWorker", (PyObject *)&FsyncWorkerType) < 0) {
        Py_DECREF(&FsyncWorkerType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
