/*
 * A call chain for the unwind benchmark, compiled twice: with
 * -fomit-frame-pointer -Wa,--gsframe (CHAIN_PREFIX sframe_) and with
 * -fno-omit-frame-pointer and no .sframe (CHAIN_PREFIX fp_), so the same
 * stacks are unwound by SFrame and by the frame-pointer walk in one run.
 *
 * Eight distinct functions call each other in a ring, so an unwind looks
 * up a different function at each frame, as in a real program, rather
 * than hitting one FDE over and over as plain recursion would.
 */
#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define FN(n) CAT(CHAIN_PREFIX, n)

typedef void (*chain_leaf_fn)(void *arg);

#define DECLARE_LINK(n) \
	__attribute__((noinline)) int FN(link##n)(int depth, chain_leaf_fn leaf, void *arg);
DECLARE_LINK(0) DECLARE_LINK(1) DECLARE_LINK(2) DECLARE_LINK(3)
DECLARE_LINK(4) DECLARE_LINK(5) DECLARE_LINK(6) DECLARE_LINK(7)

/* The volatile local and the use of the result keep a real frame and no
 * tail call in each link. */
#define DEFINE_LINK(n, next)                                              \
	__attribute__((noinline)) int FN(link##n)(int depth,              \
						   chain_leaf_fn leaf,    \
						   void *arg)             \
	{                                                                 \
		volatile int pad[n + 1];                                  \
		pad[0] = depth;                                           \
		if (depth <= 1)                                           \
			leaf(arg);                                        \
		else                                                      \
			pad[0] += FN(link##next)(depth - 1, leaf, arg);   \
		return pad[0] + 1;                                        \
	}
DEFINE_LINK(0, 1) DEFINE_LINK(1, 2) DEFINE_LINK(2, 3) DEFINE_LINK(3, 4)
DEFINE_LINK(4, 5) DEFINE_LINK(5, 6) DEFINE_LINK(6, 7) DEFINE_LINK(7, 0)

/* Call leaf(arg) with depth frames of the chain above it. */
int FN(chain)(int depth, chain_leaf_fn leaf, void *arg)
{
	return FN(link0)(depth, leaf, arg);
}
