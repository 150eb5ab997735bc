/* The common call of a compiled model, in C (backends/runtime/fastcall.py).
 *
 * A Caller holds dlpc_main's address, the argument vector with the bound parameters'
 * pointers already in it, and @main's input and output shapes and dtypes. Called on
 * the inputs, it checks each one (an exact ndarray, the dtype in native order, the
 * shape, C order), allocates the outputs, fills a copy of the vector on the stack (so
 * that concurrent calls never share it) and calls dlpc_main without the GIL; it returns
 * the list of outputs, or None when an input does not pass (the caller then takes the
 * Python path, which converts or reports it). A non-zero status goes to `fail`, which
 * raises. `pre`, when not None, runs before each call (cbuild.keep_off_workers).
 * With `repeat` (a batch run chunk after chunk, passes/graph/rebatch.py), dlpc_main is
 * the program of one chunk and runs once per chunk on the next slices. */
#define PY_SSIZE_T_CLEAN
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <Python.h>
#include <numpy/arrayobject.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int (*entry_fn)(void **);

typedef struct {
    int ndim;
    int type_num;
    int itemsize;
    npy_intp dims[NPY_MAXDIMS];
} Spec;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    entry_fn entry;
    void **argv;         /* the template: bound parameters (and the packed block) set */
    Py_ssize_t argc;     /* its length */
    Py_ssize_t n_in;     /* inputs are argv[0 .. n_in) */
    Py_ssize_t first_out;
    Py_ssize_t n_out;    /* outputs are argv[first_out .. first_out + n_out) */
    Py_ssize_t repeat;   /* dlpc_main runs this many times, on consecutive chunks */
    Spec *specs;         /* n_in inputs, then n_out outputs */
    Py_ssize_t *steps;   /* bytes of one chunk, per input then output */
    PyObject *pre;
    PyObject *fail;
    PyObject *keep;      /* whatever owns argv and the library */
    void **scratch;      /* (Bound) max-shaped buffers per input then output, or NULL */
    int busy;            /* (Bound) a call is using scratch; set and cleared under the GIL */
} Caller;

static int parse_spec(PyObject *item, Spec *s) {
    int ndim, type_num, itemsize;
    PyObject *shape;
    if (!PyArg_ParseTuple(item, "Oii", &shape, &type_num, &itemsize))
        return -1;
    PyObject *seq = PySequence_Fast(shape, "a shape is a sequence");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > NPY_MAXDIMS) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "too many dimensions");
        return -1;
    }
    ndim = (int)n;
    for (int i = 0; i < ndim; i++) {
        s->dims[i] = (npy_intp)PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(seq, i));
        if (s->dims[i] == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    s->ndim = ndim;
    s->type_num = type_num;
    s->itemsize = itemsize;
    return 0;
}

static PyObject *Caller_vectorcall(PyObject *self_, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames) {
    Caller *self = (Caller *)self_;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (kwnames != NULL || n != self->n_in)
        Py_RETURN_NONE;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = args[i];
        const Spec *s = &self->specs[i];
        if (!PyArray_CheckExact(x))
            Py_RETURN_NONE;
        PyArrayObject *a = (PyArrayObject *)x;
        PyArray_Descr *d = PyArray_DESCR(a);
        if (d->type_num != s->type_num || !PyArray_ISNBO(d->byteorder) ||
            PyArray_NDIM(a) != s->ndim || !PyArray_IS_C_CONTIGUOUS(a))
            Py_RETURN_NONE;
        const npy_intp *dims = PyArray_DIMS(a);
        for (int k = 0; k < s->ndim; k++)
            if (dims[k] != s->dims[k])
                Py_RETURN_NONE;
    }
    if (self->pre != Py_None) {
        PyObject *r = PyObject_CallNoArgs(self->pre);
        if (r == NULL)
            return NULL;
        Py_DECREF(r);
    }
    PyObject *outputs = PyList_New(self->n_out);
    if (outputs == NULL)
        return NULL;
    void *small[64];
    void **argv = self->argc <= 64 ? small : PyMem_Malloc(self->argc * sizeof(void *));
    if (argv == NULL) {
        Py_DECREF(outputs);
        return PyErr_NoMemory();
    }
    memcpy(argv, self->argv, self->argc * sizeof(void *));
    for (Py_ssize_t i = 0; i < n; i++)
        argv[i] = PyArray_DATA((PyArrayObject *)args[i]);
    for (Py_ssize_t j = 0; j < self->n_out; j++) {
        const Spec *s = &self->specs[self->n_in + j];
        PyObject *y = PyArray_SimpleNew(s->ndim, (npy_intp *)s->dims, s->type_num);
        if (y == NULL) {
            if (argv != small)
                PyMem_Free(argv);
            Py_DECREF(outputs);
            return NULL;
        }
        PyList_SET_ITEM(outputs, j, y);
        argv[self->first_out + j] = PyArray_DATA((PyArrayObject *)y);
    }
    int status = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < self->repeat && status == 0; r++) {
        if (r > 0) {
            for (Py_ssize_t i = 0; i < n; i++)
                argv[i] = (char *)argv[i] + self->steps[i];
            for (Py_ssize_t j = 0; j < self->n_out; j++)
                argv[self->first_out + j] =
                    (char *)argv[self->first_out + j] + self->steps[n + j];
        }
        status = self->entry(argv);
    }
    Py_END_ALLOW_THREADS
    if (argv != small)
        PyMem_Free(argv);
    if (status != 0) {
        Py_DECREF(outputs);
        PyObject *r = PyObject_CallFunction(self->fail, "i", status);
        Py_XDECREF(r);
        if (r != NULL)
            PyErr_SetString(PyExc_RuntimeError, "dlpc_main failed");
        return NULL;
    }
    return outputs;
}

static void Caller_dealloc(Caller *self) {
    if (self->scratch != NULL)
        for (Py_ssize_t i = 0; i < self->n_in + self->n_out; i++)
            free(self->scratch[i]);
    free(self->scratch);
    PyMem_Free(self->specs);
    PyMem_Free(self->steps);
    Py_XDECREF(self->pre);
    Py_XDECREF(self->fail);
    Py_XDECREF(self->keep);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Caller(entry, argv, argc, n_in, first_out, in_specs, out_specs, pre, fail, keep
 *        [, repeat]): entry and argv are addresses; a spec is (shape, numpy type
 * number, item size), the whole call's; with repeat > 1 each call of dlpc_main takes the next
 * 1/repeat of every input and output (split along dim 0, which repeat divides). */
static PyObject *Caller_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    unsigned long long entry, argv;
    Py_ssize_t argc, n_in, first_out, repeat = 1;
    PyObject *in_specs, *out_specs, *pre, *fail, *keep;
    if (!PyArg_ParseTuple(args, "KKnnnOOOOO|n", &entry, &argv, &argc, &n_in, &first_out,
                          &in_specs, &out_specs, &pre, &fail, &keep, &repeat))
        return NULL;
    if (repeat < 1) {
        PyErr_SetString(PyExc_ValueError, "repeat must be at least 1");
        return NULL;
    }
    Py_ssize_t n_out = PySequence_Size(out_specs);
    if (n_out < 0 || PySequence_Size(in_specs) != n_in || first_out + n_out > argc) {
        PyErr_SetString(PyExc_ValueError, "inconsistent argument layout");
        return NULL;
    }
    Caller *self = (Caller *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = Caller_vectorcall;
    self->entry = (entry_fn)(uintptr_t)entry;
    self->argv = (void **)(uintptr_t)argv;
    self->argc = argc;
    self->n_in = n_in;
    self->first_out = first_out;
    self->n_out = n_out;
    self->repeat = repeat;
    self->specs = PyMem_Calloc((size_t)(n_in + n_out) + 1, sizeof(Spec));
    self->steps = PyMem_Calloc((size_t)(n_in + n_out) + 1, sizeof(Py_ssize_t));
    Py_INCREF(pre);
    self->pre = pre;
    Py_INCREF(fail);
    self->fail = fail;
    Py_INCREF(keep);
    self->keep = keep;
    if (self->specs == NULL || self->steps == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n_in + n_out; i++) {
        PyObject *item = PySequence_GetItem(i < n_in ? in_specs : out_specs,
                                            i < n_in ? i : i - n_in);
        int bad = item == NULL || parse_spec(item, &self->specs[i]) != 0;
        Py_XDECREF(item);
        if (bad) {
            Py_DECREF(self);
            return NULL;
        }
        const Spec *s = &self->specs[i];
        Py_ssize_t bytes = s->itemsize;
        for (int k = 0; k < s->ndim; k++)
            bytes *= s->dims[k];
        if (repeat > 1 && (s->ndim == 0 || s->dims[0] % repeat != 0)) {
            Py_DECREF(self);
            PyErr_SetString(PyExc_ValueError, "repeat does not divide dim 0");
            return NULL;
        }
        self->steps[i] = bytes / repeat;
    }
    return (PyObject *)self;
}

/* A Bound: one binding's call of the one-compile program (runtime/dynamic.py), whose
 * buffers are sized for the maxima of its symbolic dims. Called on arrays of the
 * binding's shapes, it copies each into its max-shaped buffer (element (i, j) at (i, j)
 * of the buffer: the program's layout), sets the fixed arguments (the dims), runs
 * dlpc_main without the GIL and copies each output's leading block of the binding's
 * shape into a new array of that shape; None when an argument does not pass. The
 * buffers are the Caller's (`scratch`, one set per program, zeros at first); a call made
 * while another thread's call uses them takes buffers of its own. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Caller *base;
    Py_ssize_t n_args;   /* the call's arguments: the base's inputs that are not fixed */
    Py_ssize_t *arg;     /* per base input: its call argument, or -1 (fixed) */
    int *copy;           /* per base input, then output: copied (the binding cuts a dim) */
    Spec *call;          /* per base input, then output: the binding's shape */
    PyObject *fixed;     /* a tuple: per base input, the fixed array or None */
} Bound;

/* Copies the leading block `call` of a C-order array of shape `full` between its place
 * in that array (`at`) and a C-contiguous array of shape `call` (`block`). */
static void copy_block(char *at, char *block, const npy_intp *full, const npy_intp *call,
                       int ndim, Py_ssize_t itemsize, int into_full) {
    Py_ssize_t fstride[NPY_MAXDIMS], s = itemsize, chunk = itemsize, outer = 1;
    for (int a = ndim - 1; a >= 0; a--) {
        fstride[a] = s;
        s *= full[a];
    }
    int k = ndim;  /* axes k.. form one contiguous run in both layouts */
    while (k > 0 && call[k - 1] == full[k - 1])
        chunk *= full[--k];
    if (k > 0)
        chunk *= call[--k];
    for (int a = 0; a < k; a++)
        outer *= call[a];
    npy_intp index[NPY_MAXDIMS] = {0};
    for (Py_ssize_t o = 0; o < outer; o++) {
        Py_ssize_t off = 0;
        for (int a = 0; a < k; a++)
            off += index[a] * fstride[a];
        if (into_full)
            memcpy(at + off, block + o * chunk, chunk);
        else
            memcpy(block + o * chunk, at + off, chunk);
        for (int a = k - 1; a >= 0; a--) {
            if (++index[a] < call[a])
                break;
            index[a] = 0;
        }
    }
}

static Py_ssize_t spec_bytes(const Spec *s) {
    Py_ssize_t bytes = s->itemsize;
    for (int k = 0; k < s->ndim; k++)
        bytes *= s->dims[k];
    return bytes;
}

static int check_array(PyObject *x, const Spec *s) {
    if (!PyArray_CheckExact(x))
        return 0;
    PyArrayObject *a = (PyArrayObject *)x;
    PyArray_Descr *d = PyArray_DESCR(a);
    if (d->type_num != s->type_num || !PyArray_ISNBO(d->byteorder) ||
        PyArray_NDIM(a) != s->ndim || !PyArray_IS_C_CONTIGUOUS(a))
        return 0;
    const npy_intp *dims = PyArray_DIMS(a);
    for (int k = 0; k < s->ndim; k++)
        if (dims[k] != s->dims[k])
            return 0;
    return 1;
}

static PyObject *Bound_vectorcall(PyObject *self_, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames) {
    Bound *self = (Bound *)self_;
    Caller *base = self->base;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf), n_in = base->n_in, n_out = base->n_out;
    if (kwnames != NULL || n != self->n_args)
        Py_RETURN_NONE;
    for (Py_ssize_t i = 0; i < n_in; i++)
        if (self->arg[i] >= 0 && !check_array(args[self->arg[i]], &self->call[i]))
            Py_RETURN_NONE;
    if (base->pre != Py_None) {
        PyObject *r = PyObject_CallNoArgs(base->pre);
        if (r == NULL)
            return NULL;
        Py_DECREF(r);
    }
    PyObject *outputs = PyList_New(n_out);
    if (outputs == NULL)
        return NULL;
    void *small[64], *own[64];
    Py_ssize_t m = n_in + n_out;
    void **argv = base->argc <= 64 ? small : PyMem_Malloc(base->argc * sizeof(void *));
    void **bufs = m <= 64 ? own : PyMem_Calloc((size_t)m, sizeof(void *));
    int shared = !base->busy;  /* the Caller's buffers, else this call's own */
    if (bufs != NULL)
        memset(bufs, 0, (size_t)m * sizeof(void *));
    if (argv == NULL || bufs == NULL)
        goto nomemory;
    for (Py_ssize_t i = 0; i < m; i++) {
        if (!self->copy[i])
            continue;
        if (shared)
            bufs[i] = base->scratch[i];
        else if ((bufs[i] = calloc(1, (size_t)spec_bytes(&base->specs[i]) + 1)) == NULL)
            goto nomemory;
    }
    memcpy(argv, base->argv, base->argc * sizeof(void *));
    for (Py_ssize_t i = 0; i < n_in; i++) {
        PyObject *x = self->arg[i] >= 0 ? args[self->arg[i]] : PyTuple_GET_ITEM(self->fixed, i);
        argv[i] = self->copy[i] ? bufs[i] : PyArray_DATA((PyArrayObject *)x);
    }
    for (Py_ssize_t j = 0; j < n_out; j++) {
        const Spec *s = &self->call[n_in + j];
        PyObject *y = PyArray_SimpleNew(s->ndim, (npy_intp *)s->dims, s->type_num);
        if (y == NULL)
            goto fail;
        PyList_SET_ITEM(outputs, j, y);
        argv[base->first_out + j] =
            self->copy[n_in + j] ? bufs[n_in + j] : PyArray_DATA((PyArrayObject *)y);
    }
    if (shared)
        base->busy = 1;
    int status = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n_in; i++)
        if (self->copy[i])
            copy_block(bufs[i], PyArray_DATA((PyArrayObject *)args[self->arg[i]]),
                       base->specs[i].dims, self->call[i].dims, self->call[i].ndim,
                       self->call[i].itemsize, 1);
    status = base->entry(argv);
    for (Py_ssize_t j = 0; j < n_out && status == 0; j++)
        if (self->copy[n_in + j])
            copy_block(bufs[n_in + j],
                       PyArray_DATA((PyArrayObject *)PyList_GET_ITEM(outputs, j)),
                       base->specs[n_in + j].dims, self->call[n_in + j].dims,
                       self->call[n_in + j].ndim, self->call[n_in + j].itemsize, 0);
    Py_END_ALLOW_THREADS
    if (shared)
        base->busy = 0;
    if (!shared)
        for (Py_ssize_t i = 0; i < m; i++)
            free(bufs[i]);
    if (bufs != own)
        PyMem_Free(bufs);
    if (argv != small)
        PyMem_Free(argv);
    if (status != 0) {
        Py_DECREF(outputs);
        PyObject *r = PyObject_CallFunction(base->fail, "i", status);
        Py_XDECREF(r);
        if (r != NULL)
            PyErr_SetString(PyExc_RuntimeError, "dlpc_main failed");
        return NULL;
    }
    return outputs;
nomemory:
    PyErr_NoMemory();
fail:
    if (bufs != NULL && !shared)
        for (Py_ssize_t i = 0; i < m; i++)
            free(bufs[i]);
    if (bufs != NULL && bufs != own)
        PyMem_Free(bufs);
    if (argv != NULL && argv != small)
        PyMem_Free(argv);
    Py_DECREF(outputs);
    return NULL;
}

static void Bound_dealloc(Bound *self) {
    PyMem_Free(self->arg);
    PyMem_Free(self->copy);
    PyMem_Free(self->call);
    Py_XDECREF(self->fixed);
    Py_XDECREF((PyObject *)self->base);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject BoundType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_dlpc_fastcall.Bound",
    .tp_basicsize = sizeof(Bound),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(Bound, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_dealloc = (destructor)Bound_dealloc,
};

/* caller.bind(ins, outs): a Bound for one binding. `ins` has one entry per input of the
 * program: an array (fixed: passed on every call, held) or the binding's shape of that
 * input (a call argument, in order); `outs` the binding's shape of each output. Each
 * shape has the program's rank and no dim above the program's. */
static PyObject *Caller_bind(Caller *self, PyObject *args) {
    PyObject *ins, *outs;
    if (!PyArg_ParseTuple(args, "OO", &ins, &outs))
        return NULL;
    Py_ssize_t n_in = self->n_in, n_out = self->n_out, m = n_in + n_out;
    if (self->repeat != 1 || PySequence_Size(ins) != n_in || PySequence_Size(outs) != n_out) {
        PyErr_SetString(PyExc_ValueError, "bind: inconsistent with the program");
        return NULL;
    }
    if (self->scratch == NULL) {  /* the program's max-shaped buffers, once */
        if ((self->scratch = calloc((size_t)m, sizeof(void *))) == NULL)
            return PyErr_NoMemory();
        for (Py_ssize_t i = 0; i < m; i++)
            if ((self->scratch[i] = calloc(1, (size_t)spec_bytes(&self->specs[i]) + 1)) == NULL)
                return PyErr_NoMemory();
    }
    Bound *b = PyObject_New(Bound, &BoundType);
    if (b == NULL)
        return NULL;
    b->vectorcall = Bound_vectorcall;
    Py_INCREF(self);
    b->base = self;
    b->n_args = 0;
    b->arg = PyMem_Calloc((size_t)n_in + 1, sizeof(Py_ssize_t));
    b->copy = PyMem_Calloc((size_t)m + 1, sizeof(int));
    b->call = PyMem_Calloc((size_t)m + 1, sizeof(Spec));
    b->fixed = PyTuple_New(n_in);
    if (b->arg == NULL || b->copy == NULL || b->call == NULL || b->fixed == NULL) {
        Py_DECREF(b);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < m; i++) {
        PyObject *item = PySequence_GetItem(i < n_in ? ins : outs, i < n_in ? i : i - n_in);
        if (item == NULL) {
            Py_DECREF(b);
            return NULL;
        }
        const Spec *full = &self->specs[i];
        Spec *s = &b->call[i];
        if (i < n_in && PyArray_Check(item)) {
            if (!check_array(item, full)) {
                Py_DECREF(item);
                Py_DECREF(b);
                PyErr_SetString(PyExc_ValueError, "bind: a fixed argument is not the program's");
                return NULL;
            }
            b->arg[i] = -1;
            PyTuple_SET_ITEM(b->fixed, i, item);  /* (the reference is the tuple's) */
            continue;
        }
        PyObject *spec = Py_BuildValue("(Oii)", item, full->type_num, full->itemsize);
        Py_DECREF(item);
        int bad = spec == NULL || parse_spec(spec, s) != 0;
        Py_XDECREF(spec);
        if (bad || s->ndim != full->ndim) {
            Py_DECREF(b);
            if (!bad)
                PyErr_SetString(PyExc_ValueError, "bind: a shape of another rank");
            return NULL;
        }
        for (int k = 0; k < s->ndim; k++) {
            if (s->dims[k] < 0 || s->dims[k] > full->dims[k]) {
                Py_DECREF(b);
                PyErr_SetString(PyExc_ValueError, "bind: a dim above the program's");
                return NULL;
            }
            b->copy[i] |= s->dims[k] != full->dims[k];
        }
        if (i < n_in) {
            Py_INCREF(Py_None);
            PyTuple_SET_ITEM(b->fixed, i, Py_None);
            b->arg[i] = b->n_args++;
        }
    }
    return (PyObject *)b;
}

static PyMethodDef Caller_methods[] = {
    {"bind", (PyCFunction)Caller_bind, METH_VARARGS, "a Bound for one binding"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject CallerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_dlpc_fastcall.Caller",
    .tp_basicsize = sizeof(Caller),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(Caller, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = Caller_new,
    .tp_dealloc = (destructor)Caller_dealloc,
    .tp_methods = Caller_methods,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_dlpc_fastcall", NULL, -1, NULL};

PyMODINIT_FUNC PyInit__dlpc_fastcall(void) {
    import_array();
    if (PyType_Ready(&CallerType) < 0 || PyType_Ready(&BoundType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&CallerType);
    if (PyModule_AddObject(m, "Caller", (PyObject *)&CallerType) < 0) {
        Py_DECREF(&CallerType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
