package guard

import (
	"reflect"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
)

// sameLimit is ==, for a Limit that differs from another in any one field:
// a field added to core.Limit and not to sameLimit fails here.
func TestSameLimitIsEquality(t *testing.T) {
	base := core.PerMinute(10).Named("api").WithBurst(20).WithPrecision(time.Second).WithUnit("tokens")
	if b := base; !sameLimit(&base, &b) {
		t.Fatalf("sameLimit(%+v, a copy) = false, want true", base)
	}
	v := reflect.ValueOf(&base).Elem()
	for i := range v.NumField() {
		other := base
		f := reflect.ValueOf(&other).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			f.SetInt(f.Int() + 1)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.SetUint(f.Uint() + 1)
		default:
			t.Fatalf("core.Limit.%s is a %s: teach this test, and sameLimit, to compare it", v.Type().Field(i).Name, f.Kind())
		}
		if got, want := sameLimit(&base, &other), base == other; got != want {
			t.Errorf("sameLimit with %s changed = %v, want %v (==)", v.Type().Field(i).Name, got, want)
		}
		if f.Kind() == reflect.String && v.Field(i).Len() > 0 { // the same length: only the bytes differ, or only their memory
			s := []byte(v.Field(i).String())
			s[len(s)-1]++
			f.SetString(string(s))
			if sameLimit(&base, &other) {
				t.Errorf("sameLimit with the last byte of %s changed = true, want false", v.Type().Field(i).Name)
			}
			s[len(s)-1]--
			f.SetString(string(s))
			if !sameLimit(&base, &other) {
				t.Errorf("sameLimit with %s equal in other memory = false, want true", v.Type().Field(i).Name)
			}
		}
	}
}
