# Copyright (c) zklock contributors
#
# gdb attached to one backend, driven through pipes, for windows that no
# fault from outside can open on time: a breakpoint holds the backend's
# main thread at the edge of the window while the test lets the fault
# happen, then lets it go on.
#
#   my $g = ZkGdb->attach($pid, non_stop => 1) or skip ...;
#   $g->cmd('break zkl_session_await_watch');
#   $g->break_run('break f', "silent\nset \$n = \$n + 1\ncontinue");
#   $g->cmd('continue -a &');
#   $g->wait_for(qr/hit Breakpoint 1\b/, 30);
#   ... $g->cmd('continue -a &'); $g->detach;
#
# In non-stop mode a breakpoint stops only the thread that hits it: the
# client library's threads go on talking to ZooKeeper.  Every wait is
# bounded; detach (also at the end of the test) lets the backend run free.

package ZkGdb;

use strict;
use warnings;

use IPC::Run ();
use Time::HiRes qw(sleep time);

my @live;

# Attach to $pid; undef (with the reason in $ZkGdb::why) when gdb is not
# there or may not attach here (no ptrace).
our $why;

sub attach
{
	my ($class, $pid, %opt) = @_;
	my $self = bless {
		pid => $pid, in => '', out => '', n => 0,
		non_stop => $opt{non_stop} ? 1 : 0
	}, $class;
	my @cmd = ('gdb', '-q', '-nx', '-nh',
		($opt{non_stop} ? ('-iex', 'set non-stop on') : ()),
		'-iex', 'set pagination off', '-iex', 'set confirm off',
		'-iex', 'set width 0',
		# The backend's signals (a cancel's SIGINT above all) are its own.
		'-iex', 'handle SIGINT SIGUSR1 SIGUSR2 SIGURG SIGALRM SIGTERM SIGQUIT '
		  . 'SIGHUP SIGPIPE SIGCHLD nostop noprint pass',
		'-p', $pid);
	$self->{h} = eval {
		IPC::Run::start(\@cmd, \$self->{in}, \$self->{out}, '2>&1');
	};
	if (!$self->{h})
	{
		$why = "cannot run gdb: $@";
		return undef;
	}
	push @live, $self;
	my $out = $self->cmd('info inferiors', 60);
	if (!defined $out || $self->{out_all} !~ /Attaching to process $pid/
		|| $self->{out_all} =~ /ptrace: |Could not attach|not permitted/)
	{
		$why = "gdb cannot attach to a backend here: "
		  . substr($self->{out_all} // '', 0, 300);
		$self->_kill;
		return undef;
	}
	if ($opt{non_stop})
	{
		# Attaching stopped every thread: let them all run again.
		$self->cmd('continue -a &');
	}
	return $self;
}

# Run one gdb command; its output, or undef when gdb did not finish it in
# $timeout seconds.
sub cmd
{
	my ($self, $command, $timeout) = @_;
	my $mark = '<<zkgdb ' . ++$self->{n} . '>>';
	my $start = length $self->{out};
	$self->{in} .= "$command\necho $mark\\n\n";
	return undef unless $self->_pump_until(qr/\Q$mark\E/, $timeout // 30);
	my $text = substr($self->{out}, $start);
	$text =~ s/\Q$mark\E.*//s;
	return $text;
}

# Set a breakpoint ($spec: "break LOCATION [if COND]", "tbreak ...") and,
# only once gdb has set it, give it the commands $body (without "end").
# gdb's answer to the breakpoint, or '' when it was not set.  Commands sent
# after a breakpoint that failed would not wait for it: gdb would run them
# at once, in whatever frame the backend happens to be.
sub break_run
{
	my ($self, $spec, $body) = @_;
	my $out = $self->cmd($spec) // '';
	my ($n) = $out =~ /(?:Temporary b|B)reakpoint (\d+) at/;
	return '' unless defined $n;
	$self->cmd("commands $n\n$body\nend");
	return $out;
}

# Wait until gdb has printed something matching $re (an asynchronous stop,
# say); true when it came within $timeout seconds.
sub wait_for
{
	my ($self, $re, $timeout) = @_;
	return $self->_pump_until($re, $timeout);
}

# Everything gdb printed so far.
sub output { return $_[0]->{out}; }

# Remove every breakpoint, let all threads run, detach and quit.  Always
# detach: a gdb killed while its breakpoints are in place leaves a trap
# instruction in the backend, which dies of SIGTRAP at the next hit.
sub detach
{
	my ($self) = @_;
	return unless $self->{h};
	$self->cmd('delete', 10);
	$self->cmd('continue -a &', 10) if $self->{non_stop};
	$self->{in} .= "detach\nquit\n";
	my $end = time + 20;
	while ($self->{h}->pumpable && time < $end)
	{
		eval { $self->{h}->pump_nb };
		sleep 0.05;
	}
	$self->_kill;
}

sub _pump_until
{
	my ($self, $re, $timeout) = @_;
	my $end = time + $timeout;
	while (1)
	{
		$self->{out_all} = $self->{out};
		return 1 if $self->{out} =~ $re;
		return 0 if time > $end || !$self->{h}->pumpable;
		eval { $self->{h}->pump_nb };
		sleep 0.02;
	}
}

sub _kill
{
	my ($self) = @_;
	return unless $self->{h};
	eval { $self->{h}->kill_kill(grace => 2) };
	delete $self->{h};
}

END { $_->detach for grep { $_->{h} } @live; }

1;
