# Copyright (c) zklock contributors
#
# Name resolution runs on a helper thread (140_dns): a connect string of
# IPv4 addresses has nothing to resolve and starts no such thread, which
# the README promises and a short-lived connection's first call saves;
# a host name still goes through the thread.  gdb counts the thread's
# entry (session_resolve_main) in a backend that has loaded zklock but
# opened no session yet.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";

use PostgreSQL::Test::Utils;
use Test::More;
use ZkEnsemble;
use ZkGdb;
use ZklockTest;

my $zk = ZkEnsemble->new(servers => 1);
my $east = zk_cluster('east', $zk);
# Backends with zklock loaded and no session: zk_session() opens nothing.
my $numeric = session($east, set => { statement_timeout => '60s' });
my $named = session($east, set => { statement_timeout => '60s' });
{
	my $probe = ZkGdb->attach(backend_pid($numeric));
	plan skip_all => $ZkGdb::why unless $probe;
	$probe->detach;
}
is($_->query_safe('SELECT state FROM zk_session()'), 'closed', 'zklock loaded, no session yet')
  for $numeric, $named;

# Run $sql in $s with a breakpoint at the resolver thread's entry; whether
# it was hit (undef when gdb did not do each step).
sub resolver_started
{
	my ($s, $sql) = @_;
	my $g = ZkGdb->attach(backend_pid($s)) or return undef;
	my $hit = eval {
		die "no breakpoint\n"
		  unless ($g->cmd('break session_resolve_main') // '') =~ /Breakpoint 1 at/;
		$g->cmd('continue &');
		start_wait($s, $sql);
		my $seen = $g->wait_for(qr/Breakpoint 1, (?:0x\S+ in )?session_resolve_main /, 10);
		$g->cmd('delete');
		$g->cmd('continue &') if $seen;
		my ($out, $err) = finish_wait($s);
		die "the statement failed: $err\n" unless $out eq 't';
		$seen ? 1 : 0;
	};
	diag("gdb: $@" . $g->output) unless defined $hit;
	$g->detach;
	return $hit;
}

is(resolver_started($numeric, "SELECT zk_try_lock('r-1') AND zk_unlock('r-1')"), 0,
	'a connect string of addresses starts no resolver thread');

(my $hosts = $zk->connect_string) =~ s/127\.0\.0\.1:/localhost:/g;
$named->query_safe("SET zklock.hosts = '$hosts'");
is(resolver_started($named, "SELECT zk_try_lock('r-2') AND zk_unlock('r-2')"), 1,
	'a host name is resolved on the resolver thread');

quit_all_sessions();
done_testing();
