// Package ui tests anvil ui (docs/ui.md) end to end: anvil dev with its four pools, the
// pages in a real browser (Debian's headless Chromium, driven over the DevTools protocol
// with chromedp), what they show as objects change, and what a tenant's UI leaves out.
package ui
