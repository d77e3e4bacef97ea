package httpcache

import (
	"net/http"
	"time"
)

// ParseDate is http.ParseTime, with the form every current sender uses,
// the IMF-fixdate of RFC 9110 §5.6.7 ("Sun, 06 Nov 1994 08:49:37 GMT"),
// read by a few fixed-position tests instead of time.Parse, whose layout
// walk is large code run once per upstream answer (and so cold in the
// CPU's caches each time: a bulk answer's Date cost as much as several of
// its elements). Any other text, the obsolete forms and an IMF-fixdate
// spelled in another case included, goes to http.ParseTime, so the two
// agree on every input (FuzzParseDate).
func ParseDate(s string) (time.Time, error) {
	if t, ok := fixdate(s); ok {
		return t, nil
	}
	return http.ParseTime(s)
}

// fixdate reads s when it is an IMF-fixdate time.Parse would read as
// http.TimeFormat, with its day and month names as the RFC spells them;
// ok is false for anything else.
func fixdate(s string) (t time.Time, ok bool) {
	// 0         1         2
	// 01234567890123456789012345678
	// Sun, 06 Nov 1994 08:49:37 GMT
	if len(s) != 29 || s[3] != ',' || s[4] != ' ' || s[7] != ' ' || s[11] != ' ' ||
		s[16] != ' ' || s[19] != ':' || s[22] != ':' || s[25:] != " GMT" {
		return time.Time{}, false
	}
	switch s[:3] {
	case "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun":
	default:
		return time.Time{}, false
	}
	month := 0
	for i := 0; i < len(monthNames); i += 3 {
		if s[8:11] == monthNames[i:i+3] {
			month = i/3 + 1
			break
		}
	}
	day, ok1 := num2(s, 5)
	hh, ok2 := num2(s, 17)
	mm, ok3 := num2(s, 20)
	ss, ok4 := num2(s, 23)
	y1, ok5 := num2(s, 12)
	y2, ok6 := num2(s, 14)
	if month == 0 || !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || hh > 23 || mm > 59 || ss > 59 || day < 1 {
		return time.Time{}, false
	}
	t = time.Date(y1*100+y2, time.Month(month), day, hh, mm, ss, 0, time.UTC)
	if t.Day() != day { // past the month's last day: time.Parse refuses it
		return time.Time{}, false
	}
	return t, true
}

const monthNames = "JanFebMarAprMayJunJulAugSepOctNovDec"

// num2 is the two decimal digits at s[i:i+2].
func num2(s string, i int) (int, bool) {
	a, b := s[i]-'0', s[i+1]-'0'
	return int(a)*10 + int(b), a <= 9 && b <= 9
}
