// Prints the ranges of code points Go's strconv.IsPrint accepts, one "first last" pair
// (decimal, inclusive) per line: the reference for projections/goquote.ts.
package main

import (
	"fmt"
	"strconv"
)

func main() {
	in, start := false, 0
	for r := 0; r <= 0x110000; r++ {
		p := r < 0x110000 && (r < 0xd800 || r > 0xdfff) && strconv.IsPrint(rune(r))
		if p && !in {
			start, in = r, true
		}
		if !p && in {
			fmt.Printf("%d %d\n", start, r-1)
			in = false
		}
	}
}
