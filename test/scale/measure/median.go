package measure

import "slices"

// Median is the middle of xs (the mean of the two middle ones for an even count), 0 for
// none: the figure reported for runs repeated on a noisy machine.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
