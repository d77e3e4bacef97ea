package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// D returns d as a time.Duration, so callers need no conversion.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String prints Go syntax ("5m0s"), which ParseDuration reads back.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText makes /routes and other JSON views print "5m0s", not nanoseconds.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText accepts what the YAML loader accepts, so a Duration also
// decodes from JSON or a plain yaml.Unmarshal.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := parseDuration(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

func parseDuration(s string) (Duration, error) {
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
			return 0, fmt.Errorf("invalid duration %q: missing unit, as in \"%ss\"", s, s)
		}
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("invalid duration %q: must not be negative", s)
	}
	return Duration(v), nil
}

// Bytes returns the count as an int64, the type most byte limits use.
func (s Size) Bytes() int64 { return int64(s) }

// String prints the largest binary unit that divides s exactly ("8MiB"),
// else plain bytes ("1000"); either form parses back.
func (s Size) String() string {
	for _, u := range sizeUnits {
		if s != 0 && s%Size(u.mult) == 0 {
			return strconv.FormatInt(int64(s)/u.mult, 10) + u.name
		}
	}
	return strconv.FormatInt(int64(s), 10)
}

// MarshalText makes JSON views print "8MiB".
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText accepts what the YAML loader accepts.
func (s *Size) UnmarshalText(b []byte) error {
	v, err := parseSize(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// sizeUnits runs largest first so String picks the biggest exact unit.
var sizeUnits = [...]struct {
	name string
	mult int64
}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}

// parseSize reads "1048576", "512B", "64KiB", "8 MiB", "1GiB" (binary
// suffixes in any letter case). KB, MB and GB are refused rather than
// guessed: operators mean 1000 or 1024 about equally often, and a cache
// limit silently 5% off is worse than a clear error.
func parseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	num := strings.TrimRight(t, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
	unit := strings.TrimSpace(t[len(num):])
	num = strings.TrimSpace(num)
	mult := int64(0)
	switch strings.ToLower(unit) {
	case "", "b":
		mult = 1
	case "kb", "mb", "gb", "tb", "k", "m", "g", "t":
		return 0, fmt.Errorf("invalid size %q: use KiB, MiB or GiB (1024-based)", s)
	default:
		for _, u := range sizeUnits {
			if strings.EqualFold(unit, u.name) {
				mult = u.mult
			}
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if mult == 0 || err != nil || n < 0 || n > (1<<63-1)/mult {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	return Size(n * mult), nil
}
