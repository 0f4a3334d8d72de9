#!/usr/bin/perl
# Writes the test GeoIP databases for tests/core/test_geoip.c into the
# directory given as the only argument: country.mmdb (GeoLite2-Country
# layout), city.mmdb (a City-typed copy), asn.mmdb (GeoLite2-ASN, IPv4 only)
# and bogus.mmdb (a database type neither slot accepts). Exit 2 when
# MaxMind::DB::Writer is not installed, so the test can skip.
use strict;
use warnings;

BEGIN {
	unless (eval { require MaxMind::DB::Writer::Tree; 1 }) {
		print STDERR "MaxMind::DB::Writer::Tree is not installed " .
		    "(Debian: libmaxmind-db-writer-perl)\n";
		exit 2;
	}
}

die "usage: geoip_make.pl DIR\n" unless @ARGV == 1;
my $dir = $ARGV[0];

my %types = (
	country				=> 'map',
	registered_country		=> 'map',
	iso_code			=> 'utf8_string',
	names				=> 'map',
	en				=> 'utf8_string',
	autonomous_system_number	=> 'uint32',
	autonomous_system_organization	=> 'utf8_string',
	note				=> 'utf8_string',
);

sub tree {
	my ($type, $ipv) = @_;
	return MaxMind::DB::Writer::Tree->new(
	    ip_version			=> $ipv,
	    record_size			=> 24,
	    database_type		=> $type,
	    languages			=> ['en'],
	    description			=> { en => "sandgate test $type" },
	    # The fixtures use loopback, 198.18/15 and documentation nets.
	    remove_reserved_networks	=> 0,
	    alias_ipv6_to_ipv4		=> ($ipv == 6 ? 1 : 0),
	    map_key_type_callback	=> sub { $types{ $_[0] } },
	);
}

sub country {
	my ($code) = @_;
	return { iso_code => $code, names => { en => "country $code" } };
}

sub write_db {
	my ($tree, $name) = @_;
	open(my $fh, '>:raw', "$dir/$name") or die "$dir/$name: $!\n";
	$tree->write_tree($fh);
	close($fh) or die "$dir/$name: $!\n";
}

my @country = (
	[ '127.0.0.0/24',	{ country => country('KP') } ],
	[ '127.0.1.0/24',	{ country => country('DE'),
				  registered_country => country('US') } ],
	[ '198.18.0.0/16',	{ country => country('US') } ],
	[ '198.51.100.0/24',	{ registered_country => country('FR') } ],
	[ '203.0.113.0/25',	{ country => country('se') } ],
	[ '203.0.113.128/25',	{ country => country('XYZ') } ],
	[ '192.0.2.0/25',	{ note => 'no country at all' } ],
	[ '2001:db8:1::/48',	{ country => country('JP') } ],
);
for my $type ('GeoLite2-Country', 'GeoIP2-City') {
	my $t = tree($type, 6);
	$t->insert_network($_->[0], $_->[1]) for @country;
	write_db($t, $type =~ /City/ ? 'city.mmdb' : 'country.mmdb');
}

my $asn = tree('GeoLite2-ASN', 4);
$asn->insert_network('127.0.0.0/24', { autonomous_system_number => 64496,
    autonomous_system_organization => 'Test AS 64496' });
$asn->insert_network('127.0.1.0/24', { autonomous_system_number => 64511,
    autonomous_system_organization => 'Test AS 64511' });
$asn->insert_network('198.51.100.0/24',
    { autonomous_system_organization => 'no number' });
write_db($asn, 'asn.mmdb');

my $bogus = tree('Sandgate-Test-Anonymous-IP', 6);
$bogus->insert_network('127.0.0.0/24', { country => country('KP') });
write_db($bogus, 'bogus.mmdb');
exit 0;
