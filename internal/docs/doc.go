// Package docs holds no code: its tests check the repository's Markdown,
// so that every relative link a reader follows (README, docs/, bench/,
// deploy/) lands on a file of this repository and, for a #fragment into a
// Markdown file, on a heading that exists.
package docs
