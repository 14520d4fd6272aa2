/*
 * Unit tests of src/names.c: escaping and its inverse, child parsing, serial-number order
 * across the int32 wrap, and the recipe's blocker decision.  TAP output.
 */
#include <stdio.h>
#include <string.h>

#include "names.h"
#include "tap.h"

/* zkl_names_unescape as a length, or -1 when it refuses. */
static int
unescape(const char *in, char *out, size_t outsize)
{
	size_t		len;

	if (strlen(in) + 1 > outsize || !zkl_names_unescape(in, out, &len))
		return -1;
	return (int) len;
}

static void
test_escape(void)
{
	const char *names[] = {"nightly-billing", "a/b", "..", ".", "%41",
	"with space", "caf\xc3\xa9", "_c_x-lock-0000000001", "zookeeper"};
	char		esc[ZKL_ESCAPED_MAX];
	char		back[ZKL_NAME_MAX_BYTES + 1];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
	{
		char		what[ZKL_ESCAPED_MAX + 64];

		zkl_names_escape(names[i], strlen(names[i]), esc);
		snprintf(what, sizeof(what), "escape round-trips \"%s\" as %s",
				 names[i], esc);
		check(strchr(esc, '/') == NULL && strcmp(esc, ".") != 0 &&
			  strcmp(esc, "..") != 0 &&
			  unescape(esc, back, sizeof(back)) ==
			  (int) strlen(names[i]) && strcmp(back, names[i]) == 0, what);
	}
	zkl_names_escape("a/b", 3, esc);
	check(strcmp(esc, "a%2Fb") == 0, "slash is %2F");
	check(unescape("a%2", back, sizeof(back)) < 0,
		  "truncated escape is rejected");
	check(unescape("%41", back, sizeof(back)) < 0,
		  "escaped plain byte is rejected (one name, one encoding)");
	check(unescape("a.b", back, sizeof(back)) < 0,
		  "unescaped dot is rejected");
	check(unescape("%2f", back, sizeof(back)) < 0,
		  "lower-case hex is rejected (escape writes upper case)");
	check(unescape("", back, sizeof(back)) < 0, "an empty name is rejected");
	check(unescape("key:42", back, sizeof(back)) == 6 && strcmp(back, "key:42") == 0,
		  "an integer key's directory names itself");
	check(unescape("key:-1:7", back, sizeof(back)) == 8,
		  "so does a key pair, signs included");
	check(unescape("key:4:", back, sizeof(back)) < 0 &&
		  unescape("key::4", back, sizeof(back)) < 0 &&
		  unescape("key:1:2:3", back, sizeof(back)) < 0 &&
		  unescape("key:x", back, sizeof(back)) < 0,
		  "malformed keys are rejected");
	check(unescape("jobs.daily", back, sizeof(back)) < 0,
		  "another client's directory with a dot is no zklock name");
}

static void
test_parse(void)
{
	ZklChild	c;

	check(zkl_names_parse_child("_c_abc-lock-0000000042", "_c_abc", &c) &&
		  c.seq == 42 && !c.shared && c.ours, "our exclusive node");
	check(zkl_names_parse_child("_c_abc-__READ__0000000007", "_c_zzz", &c) &&
		  c.seq == 7 && c.shared && !c.ours, "foreign Curator read node");
	check(zkl_names_parse_child("_c_abc-__WRIT__0000000008", NULL, &c) &&
		  !c.shared, "Curator write node is exclusive");
	check(zkl_names_parse_child("f00d__rlock__0000000009", NULL, &c) &&
		  c.shared, "kazoo read lock node is shared");
	check(zkl_names_parse_child("f00d__lock__0000000010", NULL, &c) &&
		  !c.shared, "kazoo lock node is exclusive");
	check(zkl_names_parse_child("x-lock--000000005", NULL, &c) &&
		  c.seq == -5, "wrapped (negative) sequence");
	check(zkl_names_parse_child("x-lock--2147483647", NULL, &c) &&
		  c.seq == -2147483647, "wrapped sequence with ten digits");
	check(zkl_names_parse_child("x-lock-2147483647", NULL, &c) &&
		  c.seq == 2147483647, "largest positive after lock-");
	check(zkl_names_parse_child("x__READ__-0000000001", NULL, &c) &&
		  c.seq == -1 && c.shared, "wrapped reader after __READ__");
	check(zkl_names_parse_child("other--1000000000", NULL, &c) &&
		  c.seq == -1000000000, "unknown prefix, wrapped");
	check(zkl_names_parse_child("other-0000000012", NULL, &c) &&
		  c.seq == 12, "unknown prefix, plain");
	check(zkl_names_parse_child("x2147483647", NULL, &c) &&
		  c.seq == 2147483647, "largest sequence");
	check(!zkl_names_parse_child("no-sequence", NULL, &c),
		  "child without sequence is ignored");
	check(!zkl_names_parse_child("lock-00000abc12", NULL, &c),
		  "non-digit suffix is ignored");
}

static void
test_order(void)
{
	ZklChild	c[4];

	check(zkl_names_seq_cmp(1, 2) < 0, "1 before 2");
	check(zkl_names_seq_cmp(2147483647, -2147483647 - 1) < 0,
		  "INT32_MAX before INT32_MIN (wrap)");
	check(zkl_names_seq_cmp(2147483600, -2147483600) < 0,
		  "near-max before wrapped negative");
	zkl_names_parse_child("a-lock--2147483647", NULL, &c[0]);
	zkl_names_parse_child("b-lock-2147483646", NULL, &c[1]);
	zkl_names_parse_child("c-lock-2147483647", NULL, &c[2]);
	zkl_names_parse_child("d-lock--2147483648", NULL, &c[3]);
	zkl_names_sort(c, 4);
	check(c[0].name[0] == 'b' && c[1].name[0] == 'c' && c[2].name[0] == 'd' &&
		  c[3].name[0] == 'a', "sort keeps order across the wrap");

	/*
	 * ZooKeeper 3.8.0 hands out 2147483647 again once its counter stops:
	 * the holder "z" was created first (lower czxid) and must stay first,
	 * whatever the names say, or the newcomer "y" holds too.
	 */
	zkl_names_parse_child("z-lock-2147483647", NULL, &c[0]);
	zkl_names_parse_child("y-lock-2147483647", NULL, &c[1]);
	zkl_names_parse_child("x-lock-2147483646", NULL, &c[2]);
	c[0].czxid = 100;
	c[1].czxid = 200;
	c[2].czxid = 50;
	zkl_names_sort(c, 3);
	check(c[0].name[0] == 'x' && c[1].name[0] == 'z' && c[2].name[0] == 'y',
		  "equal sequence numbers are ordered by creation, not by name");
	check(!zkl_names_tied(c, 3, 0) && zkl_names_tied(c, 3, 1) &&
		  zkl_names_tied(c, 3, 2), "ties are found in a sorted list");
	check(zkl_names_blocker(c, 3, 2) == 1,
		  "the newcomer on an equal suffix waits for the holder");
}

static void
test_blocker(void)
{
	ZklChild	q[5];

	/* R1 R2 W3 R4(self) W5(self) */
	zkl_names_parse_child("_c_o-__READ__0000000001", "_c_me", &q[0]);
	zkl_names_parse_child("_c_o-__READ__0000000002", "_c_me", &q[1]);
	zkl_names_parse_child("_c_o-lock-0000000003", "_c_me", &q[2]);
	zkl_names_parse_child("_c_o-__READ__0000000004", "_c_me", &q[3]);
	zkl_names_parse_child("_c_o-lock-0000000005", "_c_me", &q[4]);
	check(zkl_names_blocker(q, 5, 0) == -1, "first reader holds");
	check(zkl_names_blocker(q, 5, 1) == -1, "second reader holds with first");
	check(zkl_names_blocker(q, 5, 2) == 1, "writer waits for nearest node only");
	check(zkl_names_blocker(q, 5, 3) == 2, "reader waits for earlier writer");
	check(zkl_names_blocker(q, 5, 4) == 3, "writer waits for immediate predecessor");

	/* our shared S1, then our exclusive X2: never wait on ourselves */
	zkl_names_parse_child("_c_me1-__READ__0000000001", "_c_me", &q[0]);
	zkl_names_parse_child("_c_me2-lock-0000000002", "_c_me", &q[1]);
	check(zkl_names_blocker(q, 2, 1) == -1, "own shared does not block own exclusive");
	/* ours S1, foreign X2, ours X3: wait for the foreign one */
	zkl_names_parse_child("_c_me1-__READ__0000000001", "_c_me", &q[0]);
	zkl_names_parse_child("_c_o-lock-0000000002", "_c_me", &q[1]);
	zkl_names_parse_child("_c_me3-lock-0000000003", "_c_me", &q[2]);
	check(zkl_names_blocker(q, 3, 2) == 1, "foreign waiter between own nodes blocks");
}

/* Parse names into q (own prefix "_c_me") and sort them. */
static void
queue_of(ZklChild *q, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		check(zkl_names_parse_child(names[i], "_c_me", &q[i]), names[i]);
	zkl_names_sort(q, n);
}

static void
test_handoff(void)
{
	ZklChild	q[5];
	static const char *const head[] = {"_c_o-lock-0000000001",
	"_c_me1-lock-0000000002"};
	static const char *const third[] = {"_c_o-lock-0000000001",
	"_c_p-lock-0000000002", "_c_me1-lock-0000000003"};
	static const char *const readers[] = {"_c_o-__READ__0000000001",
	"_c_p-__WRIT__0000000002", "_c_me1-__READ__0000000003"};
	static const char *const behind_two[] = {"_c_o-__WRIT__0000000001",
	"_c_p-__WRIT__0000000002", "_c_me1-__READ__0000000003"};
	static const char *const after_reader[] = {"_c_o-__READ__0000000001",
	"_c_p-__READ__0000000002", "_c_me1-__WRIT__0000000003"};
	static const char *const own_first[] = {"_c_me0-__READ__0000000001",
	"_c_o-lock-0000000002", "_c_me1-lock-0000000003"};
	static const char *const foreign[] = {"strange0000000001",
	"_c_o-lock-0000000002", "_c_me1-lock-0000000003"};
	static const char *const kazoo[] = {"abc__lock__0000000001",
	"_c_me1-lock-0000000002"};
	static const char *const tied[] = {"_c_o-lock-2147483647",
	"_c_me1-lock-2147483647"};

	queue_of(q, head, 2);
	check(zkl_names_handoff(q, 2, 1, 0), "second in line: the head's deletion hands over");
	queue_of(q, third, 3);
	check(zkl_names_handoff(q, 3, 1, 0), "the second of three is handed over");
	check(!zkl_names_handoff(q, 3, 2, 1), "a predecessor that was not the head: list again");
	queue_of(q, readers, 3);
	check(zkl_names_handoff(q, 3, 2, 1), "a reader behind one writer and earlier readers");
	queue_of(q, behind_two, 3);
	check(!zkl_names_handoff(q, 3, 2, 1), "a reader behind two writers: list again");
	queue_of(q, after_reader, 3);
	check(!zkl_names_handoff(q, 3, 2, 1), "a writer behind two readers: list again");
	queue_of(q, own_first, 3);
	check(zkl_names_handoff(q, 3, 2, 1), "our own earlier node never blocks");
	queue_of(q, foreign, 3);
	check(!zkl_names_handoff(q, 3, 2, 1), "a node no known recipe names: list again");
	queue_of(q, kazoo, 2);
	check(zkl_names_handoff(q, 2, 1, 0), "kazoo's nodes are known");
	queue_of(q, tied, 2);
	q[0].czxid = 1;
	q[1].czxid = 2;
	zkl_names_sort(q, 2);
	check(!zkl_names_handoff(q, 2, 1, 0), "equal sequence numbers: list again");
	check(!zkl_names_handoff(q, 2, 1, -1) && !zkl_names_handoff(q, 2, 0, 1),
		  "no blocker, or a blocker after self: never");
}

static void
test_uuid(void)
{
	unsigned char b[10] = {0xde, 0xad, 0xbe, 0xef, 0, 1, 2, 3, 4, 5};
	char		u1[ZKL_UUID_LEN + 1];
	char		u2[ZKL_UUID_LEN + 1];

	zkl_names_format_uuid(b, 1, u1);
	zkl_names_format_uuid(b, 2, u2);
	check(strlen(u1) == ZKL_UUID_LEN && u1[8] == '-' && u1[13] == '-' &&
		  u1[18] == '-' && u1[23] == '-', "uuid has the 8-4-4-4-12 form");
	check(strncmp(u1, u2, ZKL_UUID_SESSION_LEN) == 0 && strcmp(u1, u2) != 0,
		  "uuids of one session share the session part only");
}

/* The session part of a node's uuid, which ties a node to its backend. */
static void
test_session_of(void)
{
	char		s[ZKL_UUID_SESSION_LEN + 1];

	check(zkl_names_session_of("_c_0fef1fd9-ad53-e7f0-729a-0000000000d5-lock-0000004604", s) &&
		  strcmp(s, "0fef1fd9-ad53-e7f0-729a-0000") == 0,
		  "session part of a zklock node");
	check(zkl_names_session_of("_c_0fef1fd9-ad53-e7f0-729a-0000000000d5-__READ__0000000001", s) &&
		  strcmp(s, "0fef1fd9-ad53-e7f0-729a-0000") == 0,
		  "same session for its shared node");
	check(!zkl_names_session_of("lock-0000000001", s) &&
		  !zkl_names_session_of("_c_short-lock-0000000001", s) &&
		  !zkl_names_session_of("", s),
		  "names without a zklock uuid have no session");
}

int
main(void)
{
	test_escape();
	test_parse();
	test_order();
	test_blocker();
	test_handoff();
	test_uuid();
	test_session_of();
	return tap_done();
}
