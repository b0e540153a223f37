/* verify's one pass over a capture log's lines, in C (proxy/linecheck.py says what it is for).
 *
 * scan(program, max_line, buffer, pos) reads the lines of `buffer` from `pos`, each ending in "\n", and
 * takes a line only when, in one read of its bytes, it finds it
 *   - the contract's canonical JSON (docs/CAPTURE_FORMAT.md): no whitespace, keys sorted and unique,
 *     strings in strict UTF-8 with only the escapes json.dumps(ensure_ascii=False) writes, integers
 *     without a sign on zero or a leading zero; no float, no key with an escape, nesting of 64 at most;
 *   - a record of one of the program's kinds that conforms to its type (the schema, as linecheck.py
 *     translates it);
 *   - whose `hash` is the SHA-256 of the line without its `hash` member, and whose inline text body
 *     (if any) has the bytes its `size` and `sha256` say.
 * It stops at the first line it does not take (or that has no newline, or is max_line bytes or longer)
 * and returns (the position of that line, the groups of lines taken): a group is lines in a row each
 * naming the one before in `prev` with the next `seq`, as (the first line's facts, the Merkle leaves of
 * the others end to end, how many others, whether one of them is an exchange, the last seq, the last
 * hash). A line it does not take is not judged: the Python reading says what is wrong with it, if
 * anything.
 *
 * extend(roots, size, leaves) grows a Merkle frontier by leaves end to end (merkle.MerkleFrontier.extend),
 * as the walk adds a run's leaves to its tree.
 */
#define PY_SSIZE_T_CLEAN
#define OPENSSL_SUPPRESS_DEPRECATED
#include <Python.h>
#include <emmintrin.h>
#include <openssl/sha.h>
#include <stdint.h>
#include <string.h>

#define MAX_DEPTH 64

/* SHA-256 of one piece (the low-level calls: OpenSSL 3's SHA256() looks the digest up anew each time) */
static void sha256(const void *data, size_t len, unsigned char *digest) {
    SHA256_CTX ctx;
    SHA256_Init(&ctx);
    SHA256_Update(&ctx, data, len);
    SHA256_Final(digest, &ctx);
}

/* --- the tape: one token a value (and a key), in the order they appear ---------------------------- */

enum { C_STR, C_INT, C_TRUE, C_FALSE, C_NULL, C_ARRAY, C_OBJECT, N_CLASSES };
#define F_ESCAPED 1
#define F_NONASCII 2

typedef struct {
    unsigned char cls, flags;
    uint32_t start, end;   /* the token's bytes on the line (a string's quotes included) */
    uint32_t count;        /* items of an array, members of an object, code points of a string */
    uint32_t next;         /* the token after this one and all inside it */
    long long ival;
} Tok;

typedef struct {
    const unsigned char *p;
    Py_ssize_t len;
    Tok *tape;
    Py_ssize_t ntok, cap;
    int nomem;
} Scan;

static Py_ssize_t push(Scan *s) {
    if (s->ntok == s->cap) {
        Py_ssize_t cap = s->cap ? 2 * s->cap : 256;
        Tok *grown = PyMem_Realloc(s->tape, cap * sizeof(Tok));
        if (grown == NULL) {
            s->nomem = 1;
            return -1;
        }
        s->tape = grown, s->cap = cap;
    }
    return s->ntok++;
}

/* The length of the strict UTF-8 sequence at p (no overlong form, no surrogate, at most U+10FFFF), or 0. */
static int utf8_len(const unsigned char *p, Py_ssize_t n) {
    unsigned char c = p[0], lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        return n >= 2 && (p[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
        return n >= 3 && p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80 ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
        return n >= 4 && p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80 && (p[3] & 0xC0) == 0x80 ? 4 : 0;
    }
    return 0;
}

static int hexval(unsigned char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The string at i (its opening quote), as token t; the position after it, or -1. */
static Py_ssize_t scan_string(Scan *s, Py_ssize_t i, Tok *t) {
    const unsigned char *p = s->p;
    Py_ssize_t j = i + 1, n = s->len;
    uint32_t cp = 0;
    unsigned char flags = 0;
    const __m128i space = _mm_set1_epi8(0x20), quote = _mm_set1_epi8('"'), slash = _mm_set1_epi8('\\');
    for (;;) {
        /* 16 bytes at a time while none is a quote, a backslash, a control character or beyond ASCII
           (those are negative as signed bytes, so below 0x20 too) */
        while (j + 16 <= n) {
            __m128i v = _mm_loadu_si128((const __m128i *)(p + j));
            int m = _mm_movemask_epi8(_mm_or_si128(_mm_cmplt_epi8(v, space),
                                                   _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, slash))));
            if (m) {
                int k = __builtin_ctz(m);
                j += k, cp += k;
                break;
            }
            j += 16, cp += 16;
        }
        while (j < n && p[j] >= 0x20 && p[j] < 0x80 && p[j] != '"' && p[j] != '\\')
            j++, cp++;
        if (j >= n)
            return -1;
        unsigned char c = p[j];
        if (c == '"') {
            t->cls = C_STR, t->flags = flags, t->count = cp, t->end = (uint32_t)(j + 1);
            return j + 1;
        }
        if (c == '\\') {
            if (j + 1 >= n)
                return -1;
            switch (p[j + 1]) {
            case '"': case '\\': case 'b': case 'f': case 'n': case 'r': case 't':
                j += 2;
                break;
            case 'u': {   /* only a control character without a short form, in lowercase hex */
                if (j + 6 > n || p[j + 2] != '0' || p[j + 3] != '0' || (p[j + 4] != '0' && p[j + 4] != '1'))
                    return -1;
                int v = hexval(p[j + 5]);
                if (v < 0)
                    return -1;
                v += (p[j + 4] - '0') * 16;
                if (v == 8 || v == 9 || v == 10 || v == 12 || v == 13)
                    return -1;
                j += 6;
                break;
            }
            default:
                return -1;
            }
            cp++, flags |= F_ESCAPED;
            continue;
        }
        if (c < 0x20)
            return -1;
        int k = utf8_len(p + j, n - j);
        if (!k)
            return -1;
        j += k, cp++, flags |= F_NONASCII;
    }
}

static Py_ssize_t scan_value(Scan *s, Py_ssize_t i, int depth);

/* The value at i, counted, then a ',' (*more set) or `close`: the position after that byte; -1 otherwise. */
static Py_ssize_t scan_then(Scan *s, Py_ssize_t i, int depth, uint32_t *count, unsigned char close, int *more) {
    Py_ssize_t j = scan_value(s, i, depth);
    if (j < 0)
        return -1;
    ++*count;
    *more = j < s->len && s->p[j] == ',';
    if (*more || (j < s->len && s->p[j] == close))
        return j + 1;
    return -1;
}

static Py_ssize_t scan_members(Scan *s, Py_ssize_t i, int depth, uint32_t *count) {
    const unsigned char *p = s->p;
    Py_ssize_t n = s->len, j = i + 1, last_start = 0, last_len = -1;
    if (j < n && p[j] == '}')
        return j + 1;
    for (;;) {
        if (j >= n || p[j] != '"')
            return -1;
        Py_ssize_t k = push(s);
        if (k < 0)
            return -1;
        s->tape[k].start = (uint32_t)j;
        Py_ssize_t after = scan_string(s, j, &s->tape[k]);
        if (after < 0 || s->tape[k].flags & F_ESCAPED)
            return -1;
        s->tape[k].next = (uint32_t)s->ntok;
        /* strictly after the key before: UTF-8's byte order is the code points' order */
        Py_ssize_t len = after - j - 2;
        if (last_len >= 0) {
            int c = memcmp(p + last_start, p + j + 1, len < last_len ? len : last_len);
            if (c > 0 || (c == 0 && last_len >= len))
                return -1;
        }
        last_start = j + 1, last_len = len;
        if (after >= n || p[after] != ':')
            return -1;
        int more;
        j = scan_then(s, after + 1, depth, count, '}', &more);
        if (j < 0 || !more)
            return j;
    }
}

static Py_ssize_t scan_items(Scan *s, Py_ssize_t i, int depth, uint32_t *count) {
    const unsigned char *p = s->p;
    Py_ssize_t n = s->len, j = i + 1;
    if (j < n && p[j] == ']')
        return j + 1;
    for (int more = 1; more;) {
        j = scan_then(s, j, depth, count, ']', &more);
        if (j < 0)
            return -1;
    }
    return j;
}

static Py_ssize_t scan_number(Scan *s, Py_ssize_t i, long long *value) {
    const unsigned char *p = s->p;
    Py_ssize_t n = s->len, j = i;
    int negative = p[j] == '-';
    long long v = 0;
    if (negative)
        j++;
    if (j >= n)
        return -1;
    if (p[j] == '0') {
        if (negative)
            return -1;   /* -0: json.dumps writes 0 */
        j++;
    } else if (p[j] >= '1' && p[j] <= '9') {
        Py_ssize_t first = j;
        while (j < n && p[j] >= '0' && p[j] <= '9') {
            if (j - first >= 18)
                return -1;   /* 19 digits or more: left to Python */
            v = v * 10 + (p[j++] - '0');
        }
    } else
        return -1;
    if (j < n && (p[j] == '.' || p[j] == 'e' || p[j] == 'E'))
        return -1;   /* a float: left to Python */
    *value = negative ? -v : v;
    return j;
}

static Py_ssize_t scan_value(Scan *s, Py_ssize_t i, int depth) {
    if (i >= s->len)
        return -1;
    Py_ssize_t k = push(s), j;
    if (k < 0)
        return -1;
    Tok t = {0};
    t.start = (uint32_t)i;
    const unsigned char *p = s->p + i;
    Py_ssize_t left = s->len - i;
    switch (*p) {
    case '"':
        j = scan_string(s, i, &t);
        break;
    case '{':
        t.cls = C_OBJECT;
        j = depth < MAX_DEPTH ? scan_members(s, i, depth + 1, &t.count) : -1;
        break;
    case '[':
        t.cls = C_ARRAY;
        j = depth < MAX_DEPTH ? scan_items(s, i, depth + 1, &t.count) : -1;
        break;
    case 't':
        t.cls = C_TRUE;
        j = left >= 4 && !memcmp(p, "true", 4) ? i + 4 : -1;
        break;
    case 'f':
        t.cls = C_FALSE;
        j = left >= 5 && !memcmp(p, "false", 5) ? i + 5 : -1;
        break;
    case 'n':
        t.cls = C_NULL;
        j = left >= 4 && !memcmp(p, "null", 4) ? i + 4 : -1;
        break;
    default:
        t.cls = C_INT;
        j = *p == '-' || (*p >= '0' && *p <= '9') ? scan_number(s, i, &t.ival) : -1;
    }
    if (j < 0)
        return -1;
    t.end = (uint32_t)j;
    t.next = (uint32_t)s->ntok;
    s->tape[k] = t;
    return j;
}

/* --- the program: the types of the records it takes -------------------------------------------- */

enum { N_UNCHECKED, N_INT, N_STR, N_BOOL, N_NULL, N_LITERAL, N_LIST, N_TUPLE, N_DICT, N_UNION, N_STRUCT };

typedef struct Node Node;
struct Node {
    int kind;
    Node *allocated;             /* the node made before this one: all are freed with the program */
    int has_ge, has_le;          /* int */
    long long ge, le;
    Py_ssize_t min_len, max_len; /* str (code points), list (items); max -1: none */
    int shape;                   /* str: 0 none, 1 a template, 2 a set of members */
    unsigned char table[256];    /* a template's class of each byte, or 1 for each member */
    PyObject *template;          /* bytes */
    Py_ssize_t shape_min;
    PyObject *literals;          /* tuple of bytes: the canonical JSON of each value allowed */
    Node *item;                  /* list, dict */
    Py_ssize_t nitems;           /* tuple, struct */
    Node **items;                /* tuple items, struct fields */
    PyObject *names;             /* struct: tuple of bytes, sorted */
    char *required;
    PyObject *keysets;           /* struct: tuple of ints (bitmasks over the fields), or None */
    Node *by_class[N_CLASSES];   /* union */
};

typedef struct {
    Node *nodes;
    Py_ssize_t nkinds;
    PyObject *kinds;             /* tuple of str */
    Node **records;
    char *exchange;
} Program;

static void free_program(PyObject *capsule) {
    Program *prog = PyCapsule_GetPointer(capsule, "linecheck.program");
    if (prog == NULL)
        return;
    for (Node *n = prog->nodes, *before; n != NULL; n = before) {
        before = n->allocated;
        Py_XDECREF(n->template);
        Py_XDECREF(n->literals);
        Py_XDECREF(n->names);
        Py_XDECREF(n->keysets);
        PyMem_Free(n->items);
        PyMem_Free(n->required);
        PyMem_Free(n);
    }
    Py_XDECREF(prog->kinds);
    PyMem_Free(prog->records);
    PyMem_Free(prog->exchange);
    PyMem_Free(prog);
}

static int optional_int(PyObject *value, int *has, long long *out) {
    *has = value != Py_None;
    if (*has) {
        *out = PyLong_AsLongLong(value);
        if (*out == -1 && PyErr_Occurred())
            return -1;
    }
    return 0;
}

static int node_classes(Node *n, int *classes) {
    switch (n->kind) {
    case N_INT: classes[C_INT] = 1; return 0;
    case N_STR: classes[C_STR] = 1; return 0;
    case N_BOOL: classes[C_TRUE] = classes[C_FALSE] = 1; return 0;
    case N_NULL: classes[C_NULL] = 1; return 0;
    case N_LIST: case N_TUPLE: classes[C_ARRAY] = 1; return 0;
    case N_DICT: case N_STRUCT: classes[C_OBJECT] = 1; return 0;
    case N_LITERAL:
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(n->literals); i++) {
            const char *b = PyBytes_AS_STRING(PyTuple_GET_ITEM(n->literals, i));
            classes[b[0] == '"' ? C_STR : b[0] == 't' ? C_TRUE : b[0] == 'f' ? C_FALSE : b[0] == 'n' ? C_NULL : C_INT] = 1;
        }
        return 0;
    }
    PyErr_SetString(PyExc_ValueError, "a union member the C pass does not read");
    return -1;
}

/* A node from its description (linecheck.py, `_node`). */
static Node *make_node(Program *prog, PyObject *d) {
    if (!PyTuple_Check(d) || PyTuple_GET_SIZE(d) < 1 || !PyUnicode_Check(PyTuple_GET_ITEM(d, 0))) {
        PyErr_SetString(PyExc_ValueError, "a node is a tuple that starts with its kind");
        return NULL;
    }
    Node *n = PyMem_Calloc(1, sizeof(Node));
    if (n == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    n->allocated = prog->nodes, prog->nodes = n;
    n->max_len = -1;
    const char *kind = PyUnicode_AsUTF8(PyTuple_GET_ITEM(d, 0));
    Py_ssize_t size = PyTuple_GET_SIZE(d);
#define ARG(i) PyTuple_GET_ITEM(d, i)
#define NEED(k) if (size != (k)) goto bad
    if (!strcmp(kind, "unchecked")) {
        NEED(1);
        n->kind = N_UNCHECKED;
    } else if (!strcmp(kind, "int")) {
        NEED(3);
        n->kind = N_INT;
        if (optional_int(ARG(1), &n->has_ge, &n->ge) < 0 || optional_int(ARG(2), &n->has_le, &n->le) < 0)
            return NULL;
    } else if (!strcmp(kind, "str") || !strcmp(kind, "list")) {
        /* ("str", min, max, shape) with shape None, ("template", bytes, table) or ("members", bytes, min);
           ("list", item, min, max) */
        NEED(4);
        int is_str = kind[0] == 's', has;
        long long v;
        n->kind = is_str ? N_STR : N_LIST;
        if (optional_int(ARG(is_str ? 1 : 2), &has, &v) < 0)
            return NULL;
        n->min_len = has ? (Py_ssize_t)v : 0;
        if (optional_int(ARG(is_str ? 2 : 3), &has, &v) < 0)
            return NULL;
        n->max_len = has ? (Py_ssize_t)v : -1;
        if (!is_str) {
            if ((n->item = make_node(prog, ARG(1))) == NULL)
                return NULL;
        } else if (ARG(3) != Py_None) {
            PyObject *shape = ARG(3);
            if (!PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) != 3 || !PyBytes_Check(PyTuple_GET_ITEM(shape, 1)))
                goto bad;
            const char *how = PyUnicode_AsUTF8(PyTuple_GET_ITEM(shape, 0));
            PyObject *chars = PyTuple_GET_ITEM(shape, 1), *third = PyTuple_GET_ITEM(shape, 2);
            if (how != NULL && !strcmp(how, "template")) {
                if (!PyBytes_Check(third) || PyBytes_GET_SIZE(third) != 256)
                    goto bad;
                n->shape = 1;
                n->template = Py_NewRef(chars);
                memcpy(n->table, PyBytes_AS_STRING(third), 256);
            } else if (how != NULL && !strcmp(how, "members")) {
                n->shape = 2;
                n->shape_min = PyLong_AsSsize_t(third);
                if (n->shape_min == -1 && PyErr_Occurred())
                    return NULL;
                for (Py_ssize_t i = 0; i < PyBytes_GET_SIZE(chars); i++)
                    n->table[(unsigned char)PyBytes_AS_STRING(chars)[i]] = 1;
            } else
                goto bad;
        }
    } else if (!strcmp(kind, "bool")) {
        NEED(1);
        n->kind = N_BOOL;
    } else if (!strcmp(kind, "null")) {
        NEED(1);
        n->kind = N_NULL;
    } else if (!strcmp(kind, "literal")) {
        NEED(2);
        n->kind = N_LITERAL;
        if (!PyTuple_Check(ARG(1)) || PyTuple_GET_SIZE(ARG(1)) == 0)
            goto bad;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(ARG(1)); i++)
            if (!PyBytes_Check(PyTuple_GET_ITEM(ARG(1), i)) || PyBytes_GET_SIZE(PyTuple_GET_ITEM(ARG(1), i)) == 0)
                goto bad;
        n->literals = Py_NewRef(ARG(1));
    } else if (!strcmp(kind, "tuple") || !strcmp(kind, "union")) {
        NEED(2);
        n->kind = kind[0] == 't' ? N_TUPLE : N_UNION;
        if (!PyTuple_Check(ARG(1)))
            goto bad;
        n->nitems = PyTuple_GET_SIZE(ARG(1));
        if ((n->items = PyMem_Calloc(n->nitems + 1, sizeof(Node *))) == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        for (Py_ssize_t i = 0; i < n->nitems; i++) {
            if ((n->items[i] = make_node(prog, PyTuple_GET_ITEM(ARG(1), i))) == NULL)
                return NULL;
            if (n->kind == N_UNION) {
                int classes[N_CLASSES] = {0};
                if (node_classes(n->items[i], classes) < 0)
                    return NULL;
                for (int c = 0; c < N_CLASSES; c++) {
                    if (!classes[c])
                        continue;
                    if (n->by_class[c] != NULL) {
                        PyErr_SetString(PyExc_ValueError, "two members of a union read the same JSON type");
                        return NULL;
                    }
                    n->by_class[c] = n->items[i];
                }
            }
        }
    } else if (!strcmp(kind, "dict")) {
        NEED(2);
        n->kind = N_DICT;
        if ((n->item = make_node(prog, ARG(1))) == NULL)
            return NULL;
    } else if (!strcmp(kind, "struct")) {
        /* ("struct", ((name bytes, node, required), ...) sorted by name, keysets or None) */
        NEED(3);
        n->kind = N_STRUCT;
        PyObject *fields = ARG(1);
        if (!PyTuple_Check(fields) || PyTuple_GET_SIZE(fields) > 64 || (ARG(2) != Py_None && !PyTuple_Check(ARG(2))))
            goto bad;
        n->nitems = PyTuple_GET_SIZE(fields);
        n->items = PyMem_Calloc(n->nitems + 1, sizeof(Node *));
        n->required = PyMem_Calloc(n->nitems + 1, 1);
        if ((n->names = PyTuple_New(n->nitems)) == NULL)
            return NULL;
        if (n->items == NULL || n->required == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        for (Py_ssize_t i = 0; i < n->nitems; i++) {
            PyObject *f = PyTuple_GET_ITEM(fields, i);
            if (!PyTuple_Check(f) || PyTuple_GET_SIZE(f) != 3 || !PyBytes_Check(PyTuple_GET_ITEM(f, 0)))
                goto bad;
            PyTuple_SET_ITEM(n->names, i, Py_NewRef(PyTuple_GET_ITEM(f, 0)));
            if (i > 0 && PyObject_RichCompareBool(PyTuple_GET_ITEM(n->names, i - 1), PyTuple_GET_ITEM(f, 0), Py_LT) != 1)
                goto bad;
            if ((n->items[i] = make_node(prog, PyTuple_GET_ITEM(f, 1))) == NULL)
                return NULL;
            n->required[i] = (char)PyObject_IsTrue(PyTuple_GET_ITEM(f, 2));
        }
        n->keysets = Py_NewRef(ARG(2));
    } else
        goto bad;
    return n;
bad:
    PyErr_Format(PyExc_ValueError, "not a node the C pass reads: %R", d);
    return NULL;
#undef ARG
#undef NEED
}

/* compile(((kind, record node, exchange), ...)): the program, for scan. */
static PyObject *compile(PyObject *self, PyObject *records) {
    if (!PyTuple_Check(records)) {
        PyErr_SetString(PyExc_TypeError, "compile takes a tuple of (kind, node, exchange)");
        return NULL;
    }
    Program *prog = PyMem_Calloc(1, sizeof(Program));
    if (prog == NULL)
        return PyErr_NoMemory();
    PyObject *capsule = PyCapsule_New(prog, "linecheck.program", free_program);
    if (capsule == NULL) {
        PyMem_Free(prog);
        return NULL;
    }
    prog->nkinds = PyTuple_GET_SIZE(records);
    prog->kinds = PyTuple_New(prog->nkinds);
    prog->records = PyMem_Calloc(prog->nkinds + 1, sizeof(Node *));
    prog->exchange = PyMem_Calloc(prog->nkinds + 1, 1);
    if (prog->kinds == NULL || prog->records == NULL || prog->exchange == NULL) {
        Py_DECREF(capsule);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < prog->nkinds; i++) {
        PyObject *r = PyTuple_GET_ITEM(records, i);
        if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 3 || !PyUnicode_CheckExact(PyTuple_GET_ITEM(r, 0))) {
            PyErr_SetString(PyExc_ValueError, "a record is (kind, node, exchange)");
            Py_DECREF(capsule);
            return NULL;
        }
        PyTuple_SET_ITEM(prog->kinds, i, Py_NewRef(PyTuple_GET_ITEM(r, 0)));
        prog->records[i] = make_node(prog, PyTuple_GET_ITEM(r, 1));
        if (prog->records[i] == NULL) {
            Py_DECREF(capsule);
            return NULL;
        }
        if (prog->records[i]->kind != N_STRUCT) {
            PyErr_SetString(PyExc_ValueError, "a record's node is a struct");
            Py_DECREF(capsule);
            return NULL;
        }
        prog->exchange[i] = (char)PyObject_IsTrue(PyTuple_GET_ITEM(r, 2));
    }
    return capsule;
}

/* --- checking a line's tokens against a node ----------------------------------------------------- */

static int key_is(const Scan *s, const Tok *key, const char *name, Py_ssize_t len) {
    return (Py_ssize_t)(key->end - key->start - 2) == len && !memcmp(s->p + key->start + 1, name, len);
}

static int valid(const Scan *s, const Node *n, uint32_t k);

static int struct_valid(const Scan *s, const Node *n, uint32_t k, int records) {
    const Tok *t = &s->tape[k];
    if (t->cls != C_OBJECT)
        return 0;
    Py_ssize_t f = 0;
    unsigned long long present = 0;
    uint32_t c = k + 1;
    for (uint32_t m = 0; m < t->count; m++, c = s->tape[c + 1].next) {
        const Tok *key = &s->tape[c];
        const unsigned char *name = s->p + key->start + 1;
        Py_ssize_t len = key->end - key->start - 2;
        if (records && key_is(s, key, "kind", 4))
            continue;   /* the tag, which chose this node */
        int cmp = 1;
        while (f < n->nitems) {
            PyObject *field = PyTuple_GET_ITEM(n->names, f);
            Py_ssize_t flen = PyBytes_GET_SIZE(field);
            cmp = memcmp(PyBytes_AS_STRING(field), name, flen < len ? flen : len);
            if (cmp == 0)
                cmp = flen < len ? -1 : flen > len;
            if (cmp >= 0)
                break;
            if (n->required[f])
                return 0;
            f++;
        }
        if (cmp != 0 || !valid(s, n->items[f], c + 1))
            return 0;   /* a field the node does not have, or a value it does not take */
        present |= 1ULL << f;
        f++;
    }
    for (; f < n->nitems; f++)
        if (n->required[f])
            return 0;
    if (n->keysets == Py_None)
        return 1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(n->keysets); i++)
        if (PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(n->keysets, i)) == present)
            return 1;
    return 0;
}

static int valid(const Scan *s, const Node *n, uint32_t k) {
    const Tok *t = &s->tape[k];
    switch (n->kind) {
    case N_UNION:
        return n->by_class[t->cls] != NULL && valid(s, n->by_class[t->cls], k);
    case N_INT:
        return t->cls == C_INT && (!n->has_ge || t->ival >= n->ge) && (!n->has_le || t->ival <= n->le);
    case N_STR: {
        if (t->cls != C_STR || t->count < n->min_len || (n->max_len >= 0 && t->count > n->max_len))
            return 0;
        if (!n->shape)
            return 1;
        if (t->flags)
            return 0;   /* an escape or a character beyond ASCII: no shape takes it here */
        const unsigned char *c = s->p + t->start + 1;
        Py_ssize_t len = t->end - t->start - 2;
        if (n->shape == 1) {
            const unsigned char *want = (const unsigned char *)PyBytes_AS_STRING(n->template);
            if (len != PyBytes_GET_SIZE(n->template))
                return 0;
            for (Py_ssize_t i = 0; i < len; i++)
                if (n->table[c[i]] != want[i])
                    return 0;
            return 1;
        }
        if (len < n->shape_min)
            return 0;
        for (Py_ssize_t i = 0; i < len; i++)
            if (!n->table[c[i]])
                return 0;
        return 1;
    }
    case N_BOOL:
        return t->cls == C_TRUE || t->cls == C_FALSE;
    case N_NULL:
        return t->cls == C_NULL;
    case N_LITERAL:
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(n->literals); i++) {
            PyObject *b = PyTuple_GET_ITEM(n->literals, i);
            if ((Py_ssize_t)(t->end - t->start) == PyBytes_GET_SIZE(b) && !memcmp(s->p + t->start, PyBytes_AS_STRING(b), t->end - t->start))
                return 1;
        }
        return 0;
    case N_LIST: {
        if (t->cls != C_ARRAY || t->count < n->min_len || (n->max_len >= 0 && t->count > n->max_len))
            return 0;
        uint32_t c = k + 1;
        for (uint32_t i = 0; i < t->count; i++, c = s->tape[c].next)
            if (!valid(s, n->item, c))
                return 0;
        return 1;
    }
    case N_TUPLE: {
        if (t->cls != C_ARRAY || t->count != n->nitems)
            return 0;
        uint32_t c = k + 1;
        for (uint32_t i = 0; i < t->count; i++, c = s->tape[c].next)
            if (!valid(s, n->items[i], c))
                return 0;
        return 1;
    }
    case N_DICT: {
        if (t->cls != C_OBJECT)
            return 0;
        uint32_t c = k + 1;
        for (uint32_t i = 0; i < t->count; i++, c = s->tape[c + 1].next)
            if (!valid(s, n->item, c + 1))
                return 0;
        return 1;
    }
    case N_STRUCT:
        return struct_valid(s, n, k, 0);
    }
    return 0;   /* N_UNCHECKED: what the C pass cannot check is left to Python */
}

/* --- one line ----------------------------------------------------------------------------------- */

typedef struct {
    Py_ssize_t kind;
    long long seq;
    const unsigned char *hash, *prev;   /* 64 hex digits each, on the line */
    unsigned char own[64];              /* the hash of the line's content, hex */
    unsigned char leaf[SHA256_DIGEST_LENGTH];
} Facts;

static void hex(const unsigned char *digest, unsigned char *out) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
        out[2 * i] = digits[digest[i] >> 4], out[2 * i + 1] = digits[digest[i] & 15];
}

/* The bytes a canonical string token stands for, decoded into `out` (as long as its content at least). */
static Py_ssize_t decode(const Scan *s, const Tok *t, unsigned char *out) {
    const unsigned char *p = s->p + t->start + 1, *end = s->p + t->end - 1;
    unsigned char *o = out;
    while (p < end) {
        const unsigned char *slash = memchr(p, '\\', end - p);
        if (slash == NULL)
            slash = end;
        memcpy(o, p, slash - p);
        o += slash - p;
        if (slash == end)
            break;
        switch (slash[1]) {
        case 'b': *o++ = 8; break;
        case 'f': *o++ = 12; break;
        case 'n': *o++ = 10; break;
        case 'r': *o++ = 13; break;
        case 't': *o++ = 9; break;
        case 'u': *o++ = (unsigned char)((slash[4] - '0') * 16 + hexval(slash[5])); p = slash + 6; continue;
        default: *o++ = slash[1];   /* " and \ */
        }
        p = slash + 2;
    }
    return o - out;
}

/* Whether an inline text body's bytes are its size and sha256 (body: the token of the body object). */
static int body_ok(const Scan *s, uint32_t body, unsigned char **scratch, Py_ssize_t *room) {
    const Tok *size = NULL, *sha = NULL, *text = NULL;
    uint32_t c = body + 1;
    for (uint32_t m = 0; m < s->tape[body].count; m++, c = s->tape[c + 1].next) {
        const Tok *key = &s->tape[c];
        if (key_is(s, key, "size", 4))
            size = &s->tape[c + 1];
        else if (key_is(s, key, "sha256", 6))
            sha = &s->tape[c + 1];
        else if (key_is(s, key, "text", 4))
            text = &s->tape[c + 1];
    }
    if (text == NULL || size == NULL || sha == NULL || text->cls != C_STR || size->cls != C_INT
            || sha->cls != C_STR || sha->end - sha->start != 66)
        return 0;   /* a blob or base64 body: Python reads it */
    const unsigned char *data = s->p + text->start + 1;
    Py_ssize_t len = text->end - text->start - 2;
    if (text->flags & F_ESCAPED) {
        if (*room < len) {
            unsigned char *grown = PyMem_Realloc(*scratch, len);
            if (grown == NULL)
                return 0;
            *scratch = grown, *room = len;
        }
        len = decode(s, text, *scratch);
        data = *scratch;
    }
    unsigned char digest[SHA256_DIGEST_LENGTH], digits[64];
    sha256(data, len, digest);
    hex(digest, digits);
    return len == size->ival && !memcmp(digits, s->p + sha->start + 1, 64);
}

/* Whether the line is one the pass takes; then its facts. */
static int take(const Program *prog, Scan *s, Facts *out, unsigned char **scratch, Py_ssize_t *room) {
    s->ntok = 0;
    if (s->len == 0 || s->p[0] != '{' || scan_value(s, 0, 0) != s->len)
        return 0;
    const Tok *top = &s->tape[0];
    int kind = -1, seq = -1, hash = -1, prev = -1, body = -1;
    uint32_t c = 1;
    for (uint32_t m = 0; m < top->count; m++, c = s->tape[c + 1].next) {
        const Tok *key = &s->tape[c];
        if (key_is(s, key, "kind", 4))
            kind = c;
        else if (key_is(s, key, "seq", 3))
            seq = c;
        else if (key_is(s, key, "hash", 4))
            hash = c;
        else if (key_is(s, key, "prev", 4))
            prev = c;
        else if (key_is(s, key, "body", 4))
            body = c;
    }
    if (kind < 0 || seq < 0 || hash < 0 || prev < 0)
        return 0;
    const Tok *k = &s->tape[kind + 1];
    if (k->cls != C_STR || k->flags)
        return 0;
    out->kind = -1;
    for (Py_ssize_t i = 0; i < prog->nkinds; i++) {
        Py_ssize_t len;
        const char *name = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(prog->kinds, i), &len);
        if (name != NULL && len == (Py_ssize_t)(k->end - k->start - 2) && !memcmp(name, s->p + k->start + 1, len))
            out->kind = i;
    }
    if (out->kind < 0 || !struct_valid(s, prog->records[out->kind], 0, 1))
        return 0;
    const Tok *h = &s->tape[hash + 1], *pv = &s->tape[prev + 1], *sq = &s->tape[seq + 1];
    if (h->cls != C_STR || h->end - h->start != 66 || pv->cls != C_STR || pv->end - pv->start != 66 || sq->cls != C_INT)
        return 0;
    out->hash = s->p + h->start + 1, out->prev = s->p + pv->start + 1, out->seq = sq->ival;
    /* the content: the line without its hash member and the comma that joins it to the others */
    Py_ssize_t cut = s->tape[hash].start, cut_end = h->end;
    if (hash > 1)
        cut--;
    else if (cut_end < s->len - 1)
        cut_end++;
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256_CTX ctx;
    SHA256_Init(&ctx);
    SHA256_Update(&ctx, s->p, cut);
    SHA256_Update(&ctx, s->p + cut_end, s->len - cut_end);
    SHA256_Final(digest, &ctx);
    hex(digest, out->own);
    if (memcmp(out->own, out->hash, 64))
        return 0;
    if (body >= 0 && s->tape[body + 1].cls != C_NULL && !body_ok(s, body + 1, scratch, room))
        return 0;
    SHA256_Init(&ctx);
    SHA256_Update(&ctx, "\0", 1);
    SHA256_Update(&ctx, s->p, s->len);
    SHA256_Final(out->leaf, &ctx);
    return 1;
}

/* --- scan ---------------------------------------------------------------------------------------- */

static PyObject *ascii(const unsigned char *p) {
    return PyUnicode_DecodeASCII((const char *)p, 64, NULL);
}

static PyObject *first_facts(const Program *prog, const Facts *f) {
    PyObject *seq = PyLong_FromLongLong(f->seq), *hash = ascii(f->hash), *prev = ascii(f->prev);
    PyObject *leaf = PyBytes_FromStringAndSize((const char *)f->leaf, SHA256_DIGEST_LENGTH), *facts = NULL;
    if (seq && hash && prev && leaf)   /* line_facts: seq, kind, hash, prev, record, own hash, body, schema, leaf */
        facts = PyTuple_Pack(9, seq, PyTuple_GET_ITEM(prog->kinds, f->kind), hash, prev, Py_None, hash, Py_None,
                             Py_None, leaf);
    Py_XDECREF(seq);
    Py_XDECREF(hash);
    Py_XDECREF(prev);
    Py_XDECREF(leaf);
    return facts;
}

typedef struct {
    PyObject *first;
    unsigned char *leaves;
    Py_ssize_t more, room;
    int exchanges;
    long long seq;
    unsigned char head[64];
} Group;

static int close_group(Group *g, PyObject *groups) {
    if (g->first == NULL)
        return 0;
    PyObject *leaves = PyBytes_FromStringAndSize((const char *)g->leaves, g->more * SHA256_DIGEST_LENGTH);
    PyObject *seq = PyLong_FromLongLong(g->seq), *head = ascii(g->head), *item = NULL;
    if (leaves && seq && head)
        item = Py_BuildValue("(OOnOOO)", g->first, leaves, g->more, g->exchanges ? Py_True : Py_False, seq, head);
    Py_XDECREF(leaves);
    Py_XDECREF(seq);
    Py_XDECREF(head);
    Py_CLEAR(g->first);
    if (item == NULL || PyList_Append(groups, item) < 0) {
        Py_XDECREF(item);
        return -1;
    }
    Py_DECREF(item);
    return 0;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    PyObject *capsule;
    Py_buffer buf;
    Py_ssize_t pos, max_line;
    if (!PyArg_ParseTuple(args, "Ony*n", &capsule, &max_line, &buf, &pos))
        return NULL;
    Program *prog = PyCapsule_GetPointer(capsule, "linecheck.program");
    PyObject *groups = prog != NULL ? PyList_New(0) : NULL;
    if (groups == NULL) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    Scan s = {0};
    Group g = {0};
    unsigned char *scratch = NULL;
    Py_ssize_t room = 0;
    const unsigned char *data = buf.buf;
    int failed = 0;
    while (pos < buf.len && !failed) {
        const unsigned char *nl = memchr(data + pos, '\n', buf.len - pos);
        if (nl == NULL || nl - (data + pos) + 1 >= max_line)
            break;
        Facts f;
        s.p = data + pos, s.len = nl - (data + pos);
        if (!take(prog, &s, &f, &scratch, &room))
            break;
        if (g.first != NULL && f.seq == g.seq + 1 && !memcmp(f.prev, g.head, 64)) {
            if ((g.more + 1) * SHA256_DIGEST_LENGTH > g.room) {
                Py_ssize_t grown = g.room ? 2 * g.room : 256 * SHA256_DIGEST_LENGTH;
                unsigned char *more = PyMem_Realloc(g.leaves, grown);
                if (more == NULL) {
                    PyErr_NoMemory();
                    failed = 1;
                    break;
                }
                g.leaves = more, g.room = grown;
            }
            memcpy(g.leaves + g.more * SHA256_DIGEST_LENGTH, f.leaf, SHA256_DIGEST_LENGTH);
            g.more++;
            g.exchanges |= prog->exchange[f.kind];
        } else {
            if (close_group(&g, groups) < 0 || (g.first = first_facts(prog, &f)) == NULL) {
                failed = 1;
                break;
            }
            g.more = 0, g.exchanges = 0;
        }
        g.seq = f.seq;
        memcpy(g.head, f.hash, 64);
        pos = nl + 1 - data;
    }
    if (s.nomem && !failed) {
        PyErr_NoMemory();
        failed = 1;
    }
    if (!failed && close_group(&g, groups) < 0)
        failed = 1;
    Py_XDECREF(g.first);
    PyMem_Free(g.leaves);
    PyMem_Free(s.tape);
    PyMem_Free(scratch);
    PyBuffer_Release(&buf);
    if (failed) {
        Py_DECREF(groups);
        return NULL;
    }
    return Py_BuildValue("(nN)", pos, groups);
}

/* --- the Merkle frontier ------------------------------------------------------------------------- */

/* extend(roots, size, leaves) -> size: merkle.MerkleFrontier.extend, for a frontier's `roots` (a list of
   32-byte roots of perfect subtrees, largest first) over `size` leaves, changed in place. */
static PyObject *extend(PyObject *self, PyObject *args) {
    PyObject *roots;
    Py_ssize_t size;
    Py_buffer leaves;
    if (!PyArg_ParseTuple(args, "O!ny*", &PyList_Type, &roots, &size, &leaves))
        return NULL;
    unsigned char stack[64][SHA256_DIGEST_LENGTH], pair[1 + 2 * SHA256_DIGEST_LENGTH];
    Py_ssize_t depth = PyList_GET_SIZE(roots);
    int ok = leaves.len % SHA256_DIGEST_LENGTH == 0 && depth <= 64 && size >= 0;
    for (Py_ssize_t i = 0; ok && i < depth; i++) {
        PyObject *root = PyList_GET_ITEM(roots, i);
        ok = PyBytes_Check(root) && PyBytes_GET_SIZE(root) == SHA256_DIGEST_LENGTH;
        if (ok)
            memcpy(stack[i], PyBytes_AS_STRING(root), SHA256_DIGEST_LENGTH);
    }
    if (!ok) {
        PyBuffer_Release(&leaves);
        PyErr_SetString(PyExc_ValueError, "not a frontier of 32-byte roots and leaves of 32 bytes each");
        return NULL;
    }
    pair[0] = 1;   /* merkle.NODE_PREFIX */
    for (Py_ssize_t at = 0; at < leaves.len; at += SHA256_DIGEST_LENGTH, size++) {
        unsigned char node[SHA256_DIGEST_LENGTH];
        memcpy(node, (const unsigned char *)leaves.buf + at, SHA256_DIGEST_LENGTH);
        for (Py_ssize_t carry = size; carry & 1; carry >>= 1) {
            if (depth == 0) {
                PyBuffer_Release(&leaves);
                PyErr_SetString(PyExc_ValueError, "the frontier has fewer roots than its size says");
                return NULL;
            }
            memcpy(pair + 1, stack[--depth], SHA256_DIGEST_LENGTH);
            memcpy(pair + 1 + SHA256_DIGEST_LENGTH, node, SHA256_DIGEST_LENGTH);
            sha256(pair, sizeof pair, node);
        }
        if (depth == 64) {
            PyBuffer_Release(&leaves);
            PyErr_SetString(PyExc_ValueError, "a frontier of more than 64 roots");
            return NULL;
        }
        memcpy(stack[depth++], node, SHA256_DIGEST_LENGTH);
    }
    PyBuffer_Release(&leaves);
    PyObject *fresh = PyList_New(depth);
    if (fresh == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < depth; i++) {
        PyObject *root = PyBytes_FromStringAndSize((const char *)stack[i], SHA256_DIGEST_LENGTH);
        if (root == NULL) {
            Py_DECREF(fresh);
            return NULL;
        }
        PyList_SET_ITEM(fresh, i, root);
    }
    int failed = PyList_SetSlice(roots, 0, PyList_GET_SIZE(roots), fresh);
    Py_DECREF(fresh);
    return failed ? NULL : PyLong_FromSsize_t(size);
}

static PyMethodDef methods[] = {
    {"compile", compile, METH_O, "compile(records): the program scan checks records with (linecheck.py)."},
    {"scan", scan, METH_VARARGS, "scan(program, max_line, buffer, pos) -> (pos, groups): see the module's source."},
    {"extend", extend, METH_VARARGS, "extend(roots, size, leaves) -> size: merkle.MerkleFrontier.extend in C."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_linecheck", "verify's one pass over a log's lines, in C.", -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__linecheck(void) {
    return PyModule_Create(&module);
}
