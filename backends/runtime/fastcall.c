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

static PyTypeObject CallerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_dlpc_fastcall.Caller",
    .tp_basicsize = sizeof(Caller),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(Caller, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = Caller_new,
    .tp_dealloc = (destructor)Caller_dealloc,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_dlpc_fastcall", NULL, -1, NULL};

PyMODINIT_FUNC PyInit__dlpc_fastcall(void) {
    import_array();
    if (PyType_Ready(&CallerType) < 0)
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
