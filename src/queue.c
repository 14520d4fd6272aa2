/*-------------------------------------------------------------------------
 *
 * queue.c
 *	  The queue of one ZooKeeper directory, parsed and read: a listing in
 *	  queue order (the contender engine's decisions, the deadlock search
 *	  and the fleet views all order children so), and the plain read of
 *	  every child with its data and czxid that the fleet views show.
 *
 * Below both the contender engine (engine.c) and the deadlock search
 * (deadlock.c), which each call it and nothing of the other's.  Reads
 * with plain listings and gets, never a watch; every request is let go on
 * every way out.
 *
 *-------------------------------------------------------------------------
 */
#define ZKL_RECIPE_LAYER
#include "postgres.h"

#include <string.h>

#include "queue.h"

/* Whether a child name carries this session's prefix. */
bool
zkl_queue_is_ours(const char *name)
{
	const char *prefix = zkl_session_own_prefix();

	return strncmp(name, prefix, strlen(prefix)) == 0;
}


/*
 * Parse a listing into q, in the current memory context: every name
 * copied, the children of known recipes in queue order (ours marked when
 * own_prefix is given).  Ties of sequence numbers stay unordered.
 */
void
zkl_queue_parse(ZklQueue *q, char **names, int n, const char *own_prefix)
{
	q->n = n;
	q->names = palloc(sizeof(char *) * Max(n, 1));
	q->kids = palloc(sizeof(ZklChild) * Max(n, 1));
	q->nkids = 0;
	for (int i = 0; i < n; i++)
	{
		q->names[i] = pstrdup(names[i]);
		if (zkl_names_parse_child(q->names[i], own_prefix, &q->kids[q->nkids]))
			q->nkids++;
	}
	zkl_names_sort(q->kids, q->nkids);
}


/* The requests of a read: the listings, then every child's data. */
typedef struct ZklQueueRead
{
	ZklOp	  **lists;
	int			nlists;
	ZklOp	  **gets;
	int			ngets;
} ZklQueueRead;

/* Send and read both pipelines; every request is kept in r. */
static int
queue_read_into(ZklQueueRead *r, const char *const *dirs, int ndirs,
				ZklQueueEntry **out)
{
	ZklQueueEntry *e = NULL;
	int			n = 0;
	int			kept = 0;

	r->lists = palloc0(sizeof(ZklOp *) * Max(ndirs, 1));
	for (int d = 0; d < ndirs; d++)
		r->lists[r->nlists++] = zkl_session_children(dirs[d]);
	for (int d = 0; d < ndirs; d++)
	{
		ZklRc		rc = zkl_session_answer(r->lists[d]);
		char	  **names;
		int			m;

		if (rc != ZKL_RC_OK && rc != ZKL_RC_NO_NODE)
			zkl_session_raise(r->lists[d], dirs[d]);
		m = rc == ZKL_RC_OK ? zkl_session_op_children(r->lists[d], &names) : 0;
		e = e ? repalloc(e, sizeof(ZklQueueEntry) * (n + m + 1))
			: palloc(sizeof(ZklQueueEntry) * (m + 1));
		for (int i = 0; i < m; i++)
		{
			e[n].dir = dirs[d];
			e[n].name = pstrdup(names[i]);
			e[n].data = NULL;
			e[n].czxid = 0;
			n++;
		}
	}
	r->gets = palloc0(sizeof(ZklOp *) * Max(n, 1));
	for (int i = 0; i < n; i++)
		r->gets[r->ngets++] = zkl_session_get(psprintf("%s/%s", e[i].dir,
													   e[i].name));
	for (int i = 0; i < n; i++)
	{
		ZklRc		rc = zkl_session_answer(r->gets[i]);

		if (rc == ZKL_RC_NO_NODE)
			continue;
		if (rc != ZKL_RC_OK)
			zkl_session_raise(r->gets[i], e[i].dir);
		e[i].data = pstrdup(zkl_session_op_data(r->gets[i], &e[i].czxid));
		e[kept++] = e[i];
	}
	*out = e;
	return kept;
}

/* Let go of every request of a read. */
static void
queue_read_free(ZklQueueRead *r)
{
	for (int i = 0; i < r->nlists; i++)
		zkl_session_op_free(r->lists[i]);
	for (int i = 0; i < r->ngets; i++)
		zkl_session_op_free(r->gets[i]);
}

/*
 * Every child of the given directories with its data and czxid, for a
 * fleet view: the listings in one pipeline, then every child's data in
 * another.  Children that vanish meanwhile are left out.
 */
int
zkl_queue_read(const char *const *dirs, int ndirs, ZklQueueEntry **entries)
{
	ZklQueueRead r = {0};
	int			n;

	PG_TRY();
	{
		n = queue_read_into(&r, dirs, ndirs, entries);
	}
	PG_CATCH();
	{
		queue_read_free(&r);
		PG_RE_THROW();
	}
	PG_END_TRY();
	queue_read_free(&r);
	return n;
}
