// Shorthands for the page's elements.

export const $ = (id) => document.getElementById(id);
export const form = $('controls');
