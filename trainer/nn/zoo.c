/* zoo.c: models from a one-line description "<model> key=value ...".  ResNets of every depth
 * come from one builder driven by a spec table (stem, block kind, blocks and width per stage).
 * Parameter names and order follow the PyTorch modules of trainer/ref/make_ref.py. */
#include "trainer/nn/nn_impl.h"
#include <ctype.h>

typedef struct {
    int imagenet_stem; /* 0: conv3x3 s1; 1: conv7x7 s2 + maxpool3x3 s2 */
    int bottleneck;
    int nstages, blocks[6];
    int width;      /* channels of stage 0 (planes; x4 out for bottleneck) */
    int shortcut_a; /* option A (zero-pad identity) where shapes change; else B (1x1 conv+BN) */
    int classes;
    int in[3];
} resnet_spec_t;

typedef struct {
    const char *name;
    resnet_spec_t spec;
} resnet_preset_t;

static const resnet_preset_t presets[] = {
    /* CIFAR-10 ResNet-(6n+2): blocks n,n,n filled from n= */
    {"resnet-cifar", {0, 0, 3, {5, 5, 5}, 16, 1, 10, {3, 32, 32}}},
    {"resnet50", {1, 1, 4, {3, 4, 6, 3}, 64, 0, 1000, {3, 224, 224}}},
    {"resnet18", {1, 0, 4, {2, 2, 2, 2}, 64, 0, 1000, {3, 224, 224}}},
    /* small ResNet-8 for 28x28x1 Fashion-MNIST (16/32/64 channels, option B): ~78k parameters */
    {"resnet-fmnist", {0, 0, 3, {1, 1, 1}, 16, 0, 10, {1, 28, 28}}},
};

typedef struct {
    char key[32], val[96];
} kv_t;

static int parse(nn_model_t *m, const char *desc, char *name, size_t nlen, kv_t *kv, int *nkv) {
    const char *p = desc;
    while (isspace((unsigned char)*p)) p++;
    size_t i = 0;
    while (*p && !isspace((unsigned char)*p) && i + 1 < nlen) name[i++] = *p++;
    name[i] = 0;
    *nkv = 0;
    while (*p) {
        while (isspace((unsigned char)*p)) p++;
        if (!*p) break;
        if (*nkv == 32) {
            snprintf(m->err, sizeof m->err, "too many keys");
            return NN_ERR_ARG;
        }
        kv_t *e = &kv[*nkv];
        i = 0;
        while (*p && *p != '=' && !isspace((unsigned char)*p) && i + 1 < sizeof e->key) e->key[i++] = *p++;
        e->key[i] = 0;
        if (*p != '=') {
            snprintf(m->err, sizeof m->err, "expected key=value at \"%s\"", e->key);
            return NN_ERR_ARG;
        }
        p++;
        i = 0;
        while (*p && !isspace((unsigned char)*p) && i + 1 < sizeof e->val) e->val[i++] = *p++;
        e->val[i] = 0;
        (*nkv)++;
    }
    return NN_OK;
}

/* parse "a[x|,]b[x|,]c" into up to max ints; returns count or -1 */
static int ints(const char *s, int *out, int max) {
    int n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v <= 0 || n == max) return -1;
        out[n++] = (int)v;
        s = end;
        if (*s == 'x' || *s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return n;
}

static int conv_bn(nn_model_t *m, const char *pre, const char *cname, const char *bname, int in, int cout,
                   int k, int s, int relu) {
    char c[64], b[64];
    snprintf(c, sizeof c, "%s%s", pre, cname);
    snprintf(b, sizeof b, "%s%s", pre, bname);
    int x = nnb_conv(m, c, in, cout, k, s, k / 2, 0);
    if (x < 0) return -1;
    m->layers[m->nlayers - 1].init = 1;
    return nnb_bn(m, b, x, relu);
}

static int build_resnet(nn_model_t *m, const resnet_spec_t *sp) {
    int x = 0;
    if (sp->imagenet_stem) {
        x = conv_bn(m, "", "conv1", "bn1", x, sp->width, 7, 2, 1);
        if (x >= 0) x = nnb_pool(m, L_MAXPOOL, x, 3, 2, 1);
    } else {
        x = conv_bn(m, "", "conv1", "bn1", x, sp->width, 3, 1, 1);
    }
    for (int st = 0; st < sp->nstages && x >= 0; st++) {
        int planes = sp->width << st, cout = sp->bottleneck ? planes * 4 : planes;
        for (int bi = 0; bi < sp->blocks[st] && x >= 0; bi++) {
            char pre[32];
            snprintf(pre, sizeof pre, "layer%d.%d.", st + 1, bi);
            int s = (bi == 0 && st > 0) ? 2 : 1, cin = m->slots[x].c, y;
            if (sp->bottleneck) {
                y = conv_bn(m, pre, "conv1", "bn1", x, planes, 1, 1, 1);
                if (y >= 0) y = conv_bn(m, pre, "conv2", "bn2", y, planes, 3, s, 1);
                if (y >= 0) y = conv_bn(m, pre, "conv3", "bn3", y, cout, 1, 1, 0);
            } else {
                y = conv_bn(m, pre, "conv1", "bn1", x, planes, 3, s, 1);
                if (y >= 0) y = conv_bn(m, pre, "conv2", "bn2", y, planes, 3, 1, 0);
            }
            if (y < 0) return -1;
            int sc = x;
            if (s != 1 || cin != cout) {
                if (sp->shortcut_a && cout >= cin)
                    sc = nnb_padsub(m, x, cout, s);
                else
                    sc = conv_bn(m, pre, "downsample.0", "downsample.1", x, cout, 1, s, 0);
            }
            if (sc < 0) return -1;
            x = nnb_add(m, y, sc, 1);
        }
    }
    if (x >= 0) x = nnb_gap(m, x);
    if (x >= 0) x = nnb_fc(m, "fc", x, sp->classes, 1);
    if (x < 0) return -1;
    return nnb_loss(m, L_SOFTMAX_CE, x);
}

static int input_layer(nn_model_t *m, int ndim, int a, int b, int c) {
    m->in_ndim = ndim;
    m->in_shape[0] = a;
    m->in_shape[1] = b;
    m->in_shape[2] = c;
    int s = ndim == 3 ? nnb_slot(m, a, b, c) : ndim == 2 ? nnb_slot(m, a * b, 1, 1) : nnb_slot(m, a, 1, 1);
    if (s != 0 || !nnb_layer(m, L_INPUT, "input", -1, s)) return -1;
    return 0;
}

int nn_zoo_build(nn_model_t *m, const char *desc) {
    char name[64];
    kv_t kv[32];
    int nkv, rc = parse(m, desc, name, sizeof name, kv, &nkv);
    if (rc) return rc;
    int rn = -1;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(name, presets[i].name)) rn = (int)i;
    if (rn >= 0) {
        resnet_spec_t sp = presets[rn].spec;
        for (int i = 0; i < nkv; i++) {
            const char *k = kv[i].key, *v = kv[i].val;
            int t[6], n, ok = 0;
            if (!strcmp(k, "n") && ints(v, t, 1) == 1) {
                for (int j = 0; j < sp.nstages; j++) sp.blocks[j] = t[0];
                ok = 1;
            } else if (!strcmp(k, "blocks") && (n = ints(v, t, 6)) >= 1) {
                sp.nstages = n;
                memcpy(sp.blocks, t, sizeof(int) * n);
                ok = 1;
            } else if (!strcmp(k, "width") && ints(v, t, 1) == 1)
                sp.width = t[0], ok = 1;
            else if (!strcmp(k, "classes") && ints(v, t, 1) == 1)
                sp.classes = t[0], ok = 1;
            else if (!strcmp(k, "in") && ints(v, t, 3) == 3)
                memcpy(sp.in, t, sizeof sp.in), ok = 1;
            else if (!strcmp(k, "shortcut") && (!strcmp(v, "A") || !strcmp(v, "B")))
                sp.shortcut_a = v[0] == 'A', ok = 1;
            else if (!strcmp(k, "block") && (!strcmp(v, "basic") || !strcmp(v, "bottleneck")))
                sp.bottleneck = v[1] == 'o', ok = 1;
            if (!ok) {
                snprintf(m->err, sizeof m->err,
                         "bad or unknown key %s=%s for %s (keys: n blocks width classes in=CxHxW "
                         "shortcut=A|B block=basic|bottleneck)",
                         k, v, name);
                return NN_ERR_ARG;
            }
        }
        if (input_layer(m, 3, sp.in[0], sp.in[1], sp.in[2])) return NN_ERR_ARG;
        return build_resnet(m, &sp) < 0 ? NN_ERR_ARG : NN_OK;
    }
    if (!strcmp(name, "hyperplane") || !strcmp(name, "lstm")) {
        int lstm = name[0] == 'l';
        int F = 8192, out = 1, D = 2048, H = 512, T = 40, dense = 0, classes = 101;
        for (int i = 0; i < nkv; i++) {
            const char *k = kv[i].key;
            int t[1], *dst = NULL;
            if (!lstm && !strcmp(k, "features"))
                dst = &F;
            else if (!lstm && !strcmp(k, "out"))
                dst = &out;
            else if (lstm && !strcmp(k, "in"))
                dst = &D;
            else if (lstm && !strcmp(k, "hidden"))
                dst = &H;
            else if (lstm && !strcmp(k, "steps"))
                dst = &T;
            else if (lstm && !strcmp(k, "classes"))
                dst = &classes;
            else if (lstm && !strcmp(k, "dense"))
                dst = &dense;
            if (!dst || ints(kv[i].val, t, 1) != 1) {
                snprintf(m->err, sizeof m->err, "bad or unknown key %s=%s for %s (keys: %s)", k, kv[i].val,
                         name, lstm ? "in hidden steps dense classes" : "features out");
                return NN_ERR_ARG;
            }
            *dst = t[0];
        }
        if (!lstm) {
            if (input_layer(m, 1, F, 0, 0)) return NN_ERR_ARG;
            int x = nnb_fc(m, "fc", 0, out, 1);
            return x < 0 || nnb_loss(m, L_MSE, x) ? NN_ERR_ARG : NN_OK;
        }
        if (input_layer(m, 2, T, D, 0)) return NN_ERR_ARG;
        int x = nnb_lstm(m, "lstm", 0, T, D, H);
        if (x >= 0 && dense > 0) {
            x = nnb_fc(m, "dense", x, dense, 1);
            if (x >= 0) x = nnb_relu(m, x);
        }
        if (x >= 0) x = nnb_fc(m, "fc", x, classes, 1);
        return x < 0 || nnb_loss(m, L_SOFTMAX_CE, x) ? NN_ERR_ARG : NN_OK;
    }
    snprintf(m->err, sizeof m->err,
             "unknown model \"%s\" (known: resnet-cifar resnet50 resnet18 resnet-fmnist lstm hyperplane)",
             name);
    return NN_ERR_ARG;
}
